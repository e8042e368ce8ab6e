//! A byte series over time: what the link, the connector and the
//! interfaces moved, reading by reading.

use std::collections::VecDeque;

/// Samples kept per series (an hour at 1 s).
const SERIES_CAP: usize = 3600;

/// One reading of a series: (time, bytes, count).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    pub t: f64,
    pub bytes: f64,
    /// Requests (predicted), transfers (NIXL) or folders (kv-dir).
    pub count: f64,
}

#[derive(Debug, Clone, Default)]
pub struct Series {
    pub points: VecDeque<Point>,
    pub total_bytes: f64,
    pub total_count: f64,
}

impl Series {
    pub fn push(&mut self, p: Point) {
        self.total_bytes += p.bytes;
        self.total_count += p.count;
        self.points.push_back(p);
        while self.points.len() > SERIES_CAP {
            self.points.pop_front();
        }
    }

    /// (bytes, count) of the points after `since`.
    pub fn since(&self, since: f64) -> (f64, f64) {
        self.points
            .iter()
            .rev()
            .take_while(|p| p.t > since)
            .fold((0.0, 0.0), |(b, c), p| (b + p.bytes, c + p.count))
    }
}
