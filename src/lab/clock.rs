//! The lab's clock: real time mapped to the recording's, looping or not.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::time::Instant;

/// Pause between the end of the recording and its next loop (lab seconds).
pub(super) const LOOP_GAP_SECS: f64 = 3.0;

/// Maps real time to the recording's time.
#[derive(Debug, Clone)]
pub struct LabClock {
    pub(super) start: Instant,
    /// Unix seconds at `start`: the lab prints its recording's lines on a
    /// clock that starts then and runs at its speed, through every loop,
    /// as a lab that never stopped would (`stamp_time`).
    pub(super) wall0: f64,
    pub(super) t0: f64,
    pub(super) t_end: f64,
    pub(super) speed: f64,
    pub(super) looping: bool,
    /// Set when the lab's owner is done: its writers stop (a folder removed
    /// after it is not made again).
    pub(super) stop: Arc<AtomicBool>,
}

impl LabClock {
    /// Stops the lab's writers and servers at their next step.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// (loop number, recording time) now.
    pub fn now(&self) -> (u64, f64) {
        let elapsed = self.start.elapsed().as_secs_f64() * self.speed;
        let span = self.t_end - self.t0 + LOOP_GAP_SECS;
        if self.looping && span > 0.0 {
            let n = (elapsed / span).floor();
            (n as u64, self.t0 + (elapsed - n * span))
        } else {
            (0, self.t0 + elapsed)
        }
    }

    /// The time the lab prints on a line of recording time `t` in loop
    /// `loop_no`: its own clock, which moves on through every loop.
    pub fn stamp_time(&self, loop_no: u64, t: f64) -> f64 {
        let span = self.t_end - self.t0 + LOOP_GAP_SECS;
        self.wall0 + loop_no as f64 * span + (t - self.t0)
    }

    /// The Unix time its clock started: the stamps it prints run at its
    /// speed from then (a watcher's clock: `ScaledClock::of_lab`).
    pub fn stamp_origin(&self) -> f64 {
        self.wall0
    }

    /// The recording has been played once (and the lab does not loop).
    pub fn finished(&self) -> bool {
        !self.looping && self.now().1 > self.t_end
    }

    /// Fraction of the recording played in this loop.
    pub fn progress(&self) -> f64 {
        let (_, t) = self.now();
        ((t - self.t0) / (self.t_end - self.t0).max(1e-9)).clamp(0.0, 1.0)
    }
}
