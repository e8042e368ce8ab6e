//! Time as an injectable effect: the live app uses the system clock; tests
//! and replays can drive their own.

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub trait Clock: Send + Sync {
    /// Unix time in seconds.
    fn now(&self) -> f64;
    fn sleep(&self, d: Duration) -> Pin<Box<dyn Future<Output = ()> + Send>>;
}

/// The real clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> f64 {
        SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
    }

    fn sleep(&self, d: Duration) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        Box::pin(tokio::time::sleep(d))
    }
}

/// A clock that runs `speed` times faster than real time from `origin`:
/// a sped-up lab's latencies are in lab seconds, so pdtop's own time must
/// be too, or ages, windows and the miss detector's timing would disagree
/// with the histograms. Sleeps stay in real time.
#[derive(Debug, Clone, Copy)]
pub struct ScaledClock {
    origin: f64,
    start: std::time::Instant,
    speed: f64,
}

impl ScaledClock {
    pub fn new(origin: f64, speed: f64) -> ScaledClock {
        ScaledClock {
            origin,
            start: std::time::Instant::now(),
            speed: if speed.is_finite() && speed > 0.0 { speed } else { 1.0 },
        }
    }
}

impl Clock for ScaledClock {
    fn now(&self) -> f64 {
        self.origin + self.start.elapsed().as_secs_f64() * self.speed
    }

    fn sleep(&self, d: Duration) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        Box::pin(tokio::time::sleep(d))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scaled_clock_runs_fast_from_its_origin() {
        let c = ScaledClock::new(1000.0, 10.0);
        let t0 = c.now();
        assert!((1000.0..1000.5).contains(&t0));
        std::thread::sleep(Duration::from_millis(50));
        let dt = c.now() - t0;
        assert!(dt >= 0.5, "{dt}");
    }
}
