//! Time as an injectable effect: the live app uses the system clock; tests
//! and replays can drive their own.

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub trait Clock: Send + Sync {
    /// Unix time in seconds.
    fn now(&self) -> f64;
    fn sleep(&self, d: Duration) -> Pin<Box<dyn Future<Output = ()> + Send>>;
    /// Clock seconds per real second: a moment `d` clock seconds away
    /// comes `d / speed` real seconds from now.
    fn speed(&self) -> f64 {
        1.0
    }
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

    /// The sped-up clock a lab started at Unix time `wall0` prints its
    /// stamps on: `wall0 + speed x (real time since wall0)`, the same
    /// whenever the watcher starts. A clock started at the watcher's own
    /// start would lag the lab's stamps by `(speed - 1) x` its delay.
    pub fn of_lab(wall0: f64, speed: f64) -> ScaledClock {
        let mut c = ScaledClock::new(wall0, speed);
        c.origin = wall0 + (SystemClock.now() - wall0) * c.speed;
        c
    }
}

impl Clock for ScaledClock {
    fn now(&self) -> f64 {
        self.origin + self.start.elapsed().as_secs_f64() * self.speed
    }

    fn speed(&self) -> f64 {
        self.speed
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

    #[test]
    fn watchers_of_one_lab_keep_its_time_whenever_they_start() {
        let wall0 = SystemClock.now() - 2.0;
        let early = ScaledClock::of_lab(wall0, 5.0);
        std::thread::sleep(Duration::from_millis(200));
        let late = ScaledClock::of_lab(wall0, 5.0);
        // Two seconds and more since the lab started, at 5x: ten and more.
        let (a, b) = (early.now(), late.now());
        assert!((a - b).abs() < 0.05, "{a} {b}");
        assert!(b - wall0 >= 11.0, "{}", b - wall0);
        // One started at the watcher's own start lags (5 - 1) x 2 s behind.
        let own = ScaledClock::new(SystemClock.now(), 5.0);
        assert!(early.now() - own.now() > 8.0);
    }
}
