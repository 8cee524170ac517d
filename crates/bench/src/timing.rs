//! Seconds per part of a benchmark, for its result file (`seconds_by_part`): the runner
//! measures the encoder's share itself (the embedding cache's clocks); a protocol names its
//! other costly parts with [`part`] (`xnli`: `classifier training`, `classification`). What
//! no part claims is `other` (reading the data, features, scoring).
//!
//! A thread-local collector rather than a field of the protocol's `Context`: a protocol runs
//! on the runner's thread, and its parts' parallel work happens inside the closures timed.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::time::Instant;

thread_local! {
    static PARTS: RefCell<Option<BTreeMap<String, f64>>> = const { RefCell::new(None) };
}

/// Runs `f`, adding its wall time to part `name` of the benchmark being collected (see
/// [`collect`]); outside a collection it only runs `f`. Time only work that encodes nothing:
/// the runner adds the encoder's and the cache's seconds on its own, so a part around an
/// `embed` call would count them twice.
pub fn part<T>(name: &str, f: impl FnOnce() -> T) -> T {
    let start = Instant::now();
    let out = f();
    let seconds = start.elapsed().as_secs_f64();
    PARTS.with(|p| {
        if let Some(parts) = p.borrow_mut().as_mut() {
            *parts.entry(name.to_string()).or_default() += seconds;
        }
    });
    out
}

/// Runs `f` collecting the [`part`]s it times; returns its value and the seconds per part.
pub fn collect<T>(f: impl FnOnce() -> T) -> (T, BTreeMap<String, f64>) {
    let outer = PARTS.with(|p| p.borrow_mut().replace(BTreeMap::new()));
    let out = f();
    let parts = PARTS.with(|p| std::mem::replace(&mut *p.borrow_mut(), outer));
    (out, parts.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_add_up_inside_a_collection_only() {
        part("outside", || ());
        let (v, parts) = collect(|| {
            part("a", || {
                std::thread::sleep(std::time::Duration::from_millis(2))
            });
            part("a", || ());
            part("b", || 7)
        });
        assert_eq!(v, 7);
        assert_eq!(parts.keys().collect::<Vec<_>>(), ["a", "b"]);
        assert!(parts["a"] >= 0.002);
        assert!(collect(|| ()).1.is_empty(), "a collection starts empty");
    }
}
