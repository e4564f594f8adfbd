//! Validation curves of several runs (seeds) on one time axis: each run's curve is a step
//! function (its value at time `t` is the last validated value at or before `t`), and the
//! runs are averaged at the same times, so a method's line is the mean over seeds at every
//! time up to the budget's end, its band the spread (min to max) over seeds. At the end of
//! the axis every run holds its final value: the line's last value is the mean of the runs'
//! final values, the table's "final val".

/// The mean and spread over runs at one time of the grid.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct GridPoint {
    /// Training time, seconds.
    pub t: f64,
    /// Mean over runs of each run's value at `t` (NaN when a run's value is NaN: undefined).
    pub mean: f64,
    /// Smallest run value at `t`.
    pub min: f64,
    /// Largest run value at `t`.
    pub max: f64,
}

/// The value at time `t` of a run whose validated points are `points` (`(seconds, value)`,
/// in time order): that of the last point at or before `t`; `None` before the first.
pub fn step_value(points: &[(f64, f64)], t: f64) -> Option<f64> {
    let after = points.partition_point(|&(pt, _)| pt <= t);
    after.checked_sub(1).map(|i| points[i].1)
}

/// The times where the mean of `runs` may change, up to `end`: every point's time at which
/// every run already has a value (the line starts when the last run's first validation
/// arrives: before, a mean over fewer runs would be another quantity), and `end` itself;
/// sorted, without repeats. Empty when a run has no point at or before `end`.
pub fn grid(runs: &[Vec<(f64, f64)>], end: f64) -> Vec<f64> {
    let Some(start) = runs
        .iter()
        .map(|r| r.first().map(|p| p.0))
        .try_fold(f64::NEG_INFINITY, |a, b| b.map(|b| a.max(b)))
    else {
        return Vec::new();
    };
    if runs.is_empty() || start > end {
        return Vec::new();
    }
    let mut ts: Vec<f64> = runs
        .iter()
        .flatten()
        .map(|p| p.0)
        .filter(|&t| t >= start && t <= end)
        .chain([end])
        .collect();
    ts.sort_by(f64::total_cmp);
    ts.dedup();
    ts
}

/// The mean and min-max band of `runs` (each a run's validated points in time order) at every
/// time of [`grid`]`(runs, end)`, each run read as a step function ([`step_value`]).
pub fn mean_band(runs: &[Vec<(f64, f64)>], end: f64) -> Vec<GridPoint> {
    grid(runs, end)
        .into_iter()
        .map(|t| {
            let vs: Vec<f64> = runs
                .iter()
                .map(|r| step_value(r, t).expect("the grid starts where every run has a value"))
                .collect();
            let undefined = vs.iter().any(|v| v.is_nan());
            let nan_or = |x: f64| if undefined { f64::NAN } else { x };
            GridPoint {
                t,
                mean: nan_or(vs.iter().sum::<f64>() / vs.len() as f64),
                min: nan_or(vs.iter().copied().fold(f64::INFINITY, f64::min)),
                max: nan_or(vs.iter().copied().fold(f64::NEG_INFINITY, f64::max)),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_function_holds_the_last_value_and_is_undefined_before_the_first() {
        let r = [(1.0, 0.5), (2.0, 0.7), (4.0, 0.6)];
        assert_eq!(step_value(&r, 0.99), None);
        assert_eq!(step_value(&r, 1.0), Some(0.5));
        assert_eq!(step_value(&r, 1.5), Some(0.5));
        assert_eq!(step_value(&r, 2.0), Some(0.7));
        assert_eq!(step_value(&r, 3.99), Some(0.7));
        assert_eq!(step_value(&r, 10.0), Some(0.6));
        assert_eq!(step_value(&[], 1.0), None);
    }

    #[test]
    fn two_runs_average_on_one_grid_up_to_the_end_with_their_min_max_band() {
        // run a validated at 1, 3, 5 s; run b at 2, 4, 6.5 s (past a 6 s budget: the end is
        // the later of the budget and the last validation, so the caller passes 6.5)
        let a = vec![(1.0, 0.25), (3.0, 0.5), (5.0, 0.75)];
        let b = vec![(2.0, 0.5), (4.0, 1.0), (6.5, 0.875)];
        assert_eq!(
            grid(&[a.clone(), b.clone()], 6.5),
            [2.0, 3.0, 4.0, 5.0, 6.5]
        );
        let m = mean_band(&[a.clone(), b.clone()], 6.5);
        let got: Vec<(f64, f64, f64, f64)> =
            m.iter().map(|p| (p.t, p.mean, p.min, p.max)).collect();
        assert_eq!(
            got,
            [
                (2.0, 0.375, 0.25, 0.5),    // a 0.25, b 0.5
                (3.0, 0.5, 0.5, 0.5),       // a 0.5, b 0.5
                (4.0, 0.75, 0.5, 1.0),      // a 0.5, b 1.0
                (5.0, 0.875, 0.75, 1.0),    // a 0.75, b 1.0
                (6.5, 0.8125, 0.75, 0.875)  // both final: the mean of the final values
            ]
        );
        // a longer axis holds the final values to its end
        let m = mean_band(&[a.clone(), b.clone()], 8.0);
        assert_eq!(m.last().map(|p| (p.t, p.mean)), Some((8.0, 0.8125)));
        // an end before every run has a point: nothing to draw
        assert!(mean_band(&[a, b], 1.5).is_empty());
    }

    #[test]
    fn an_undefined_value_makes_the_mean_undefined_and_no_run_means_no_grid() {
        let a = vec![(1.0, 0.5), (2.0, f64::NAN)];
        let b = vec![(1.0, 0.7)];
        let m = mean_band(&[a, b], 2.0);
        assert_eq!(m.len(), 2);
        assert!((m[0].mean - 0.6).abs() < 1e-12);
        assert!(m[1].mean.is_nan() && m[1].min.is_nan() && m[1].max.is_nan());
        assert!(grid(&[], 3.0).is_empty());
        assert!(grid(&[vec![(1.0, 0.5)], vec![]], 3.0).is_empty());
    }
}
