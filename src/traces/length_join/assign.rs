//! Which copy each decode request of one length can have had. Every
//! decode request had at most one copy, and a copy served one decode, so a
//! copy is a decode's possible prefill only if the other decode requests
//! can still each have a copy of their own: times alone often leave one.

/// Above this many decode requests a class is not searched: each may have
/// had any copy that fits it.
const SEARCH_LIMIT: usize = 24;

/// The copies of one class as the decode requests could have had them.
#[derive(Debug, PartialEq)]
pub(super) struct Assignment {
    /// For each decode, oldest first: the copy it takes, the oldest that
    /// leaves every later decode a copy.
    pub taken: Vec<usize>,
    /// For each decode: every copy it could have had.
    pub possible: Vec<Vec<usize>>,
}

/// `fit[d][k]`: copy `k` could be decode request `d`'s. `None` when the
/// decode requests cannot each have a copy (one of them had none).
pub(super) fn assign(fit: &[Vec<bool>]) -> Option<Assignment> {
    let copies = fit.first().map_or(0, Vec::len);
    let all: Vec<usize> = (0..fit.len()).collect();
    if matched(fit, &all, &[]) < fit.len() {
        return None;
    }
    if fit.len() > SEARCH_LIMIT {
        let possible: Vec<Vec<usize>> =
            fit.iter().map(|row| (0..copies).filter(|&k| row[k]).collect()).collect();
        let mut used = vec![false; copies];
        let mut taken = Vec::new();
        for row in fit {
            let k = (0..copies).find(|&k| row[k] && !used[k])?;
            used[k] = true;
            taken.push(k);
        }
        return Some(Assignment { taken, possible });
    }
    let possible = (0..fit.len())
        .map(|d| {
            let rest: Vec<usize> = all.iter().copied().filter(|&x| x != d).collect();
            (0..copies).filter(|&k| fit[d][k] && matched(fit, &rest, &[k]) == rest.len()).collect()
        })
        .collect();
    let mut taken: Vec<usize> = Vec::new();
    for d in 0..fit.len() {
        let rest: Vec<usize> = (d + 1..fit.len()).collect();
        let k = (0..copies).find(|&k| {
            fit[d][k] && !taken.contains(&k) && {
                let mut gone = taken.clone();
                gone.push(k);
                matched(fit, &rest, &gone) == rest.len()
            }
        })?;
        taken.push(k);
    }
    Some(Assignment { taken, possible })
}

/// How many of `decodes` can each have a copy, none of `gone` (augmenting
/// paths: the classes are small).
pub(super) fn matched(fit: &[Vec<bool>], decodes: &[usize], gone: &[usize]) -> usize {
    let copies = fit.first().map_or(0, Vec::len);
    let mut holder: Vec<Option<usize>> = vec![None; copies];
    let mut count = 0;
    for &d in decodes {
        let mut seen = vec![false; copies];
        if augment(fit, d, gone, &mut seen, &mut holder) {
            count += 1;
        }
    }
    count
}

fn augment(
    fit: &[Vec<bool>],
    d: usize,
    gone: &[usize],
    seen: &mut [bool],
    holder: &mut [Option<usize>],
) -> bool {
    for k in 0..seen.len() {
        if !fit[d][k] || seen[k] || gone.contains(&k) {
            continue;
        }
        seen[k] = true;
        if holder[k].is_none_or(|other| augment(fit, other, gone, seen, holder)) {
            holder[k] = Some(d);
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_that_leave_one_copy_each_make_every_pair_exact() {
        // Decodes at 159, 162, 166; copies answered at 158, 161, 166: the
        // first decode can only have the first copy, so the second has the
        // second.
        let fit = vec![vec![true, false, false], vec![true, true, false], vec![false, true, true]];
        let a = assign(&fit).unwrap();
        assert_eq!(a.taken, vec![0, 1, 2]);
        assert_eq!(a.possible, vec![vec![0], vec![1], vec![2]]);
    }

    #[test]
    fn copies_any_decode_could_have_had_are_each_possible() {
        let fit = vec![vec![true, true], vec![true, true]];
        let a = assign(&fit).unwrap();
        assert_eq!(a.taken, vec![0, 1]);
        assert_eq!(a.possible, vec![vec![0, 1], vec![0, 1]]);
    }

    #[test]
    fn the_oldest_copy_is_not_taken_when_a_later_decode_needs_it() {
        // Decode 0 fits both; decode 1 only the first: oldest-first greedy
        // would leave decode 1 without one.
        let fit = vec![vec![true, true], vec![true, false]];
        let a = assign(&fit).unwrap();
        assert_eq!(a.taken, vec![1, 0]);
        assert_eq!(a.possible, vec![vec![1], vec![0]]);
    }

    #[test]
    fn a_decode_left_without_a_copy_means_none_is_known() {
        assert_eq!(assign(&[vec![true, false], vec![true, false]]), None);
        assert_eq!(assign(&[vec![true], vec![true]]), None);
    }

    #[test]
    fn a_class_too_large_to_search_names_every_fitting_copy() {
        let n = SEARCH_LIMIT + 1;
        let fit: Vec<Vec<bool>> = (0..n).map(|d| (0..n).map(|k| k <= d).collect()).collect();
        let a = assign(&fit).unwrap();
        assert_eq!(a.taken, (0..n).collect::<Vec<_>>());
        assert_eq!(a.possible[1], vec![0, 1]);
    }
}
