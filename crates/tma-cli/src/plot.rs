//! Line plots as SVG (plotters' SVG backend: no font files or system libraries needed; text
//! is written as SVG `<text>` and laid out by the viewer).

use anyhow::{anyhow, Result};
use plotters::prelude::*;
use std::path::Path;

/// One line of a plot: a label and its `(x, y)` points in drawing order. A point with a
/// non-finite coordinate breaks the line (it is not drawn).
pub struct Series {
    pub label: String,
    pub points: Vec<(f64, f64)>,
    /// Draw the line as a step function (each value held until the next point's x) without
    /// point markers; otherwise straight segments between markers.
    pub step: bool,
    /// A band around the line, `(x, low, high)` in x order, filled in the line's colour
    /// (translucent); read as a step function like the line when `step`. Empty: none.
    pub band: Vec<(f64, f64, f64)>,
}

/// `points` as the vertices of a step function: each value held until the next point's x.
fn steps(points: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let mut v = Vec::with_capacity(2 * points.len());
    for (i, &p) in points.iter().enumerate() {
        if i > 0 {
            v.push((p.0, points[i - 1].1));
        }
        v.push(p);
    }
    v
}

/// The runs of consecutive finite points of `points` (a non-finite one ends a run).
fn finite_runs<T: Copy>(points: &[T], finite: impl Fn(&T) -> bool) -> Vec<Vec<T>> {
    let mut runs = vec![Vec::new()];
    for p in points {
        if finite(p) {
            runs.last_mut().expect("one run at least").push(*p);
        } else if !runs.last().expect("one run at least").is_empty() {
            runs.push(Vec::new());
        }
    }
    runs.retain(|r| !r.is_empty());
    runs
}

/// The outline of a band (`(x, low, high)`): the high edge forward, the low edge back.
fn band_outline(band: &[(f64, f64, f64)], step: bool) -> Vec<(f64, f64)> {
    let hi: Vec<(f64, f64)> = band.iter().map(|&(x, _, h)| (x, h)).collect();
    let lo: Vec<(f64, f64)> = band.iter().map(|&(x, l, _)| (x, l)).collect();
    let (mut hi, mut lo) = if step {
        (steps(&hi), steps(&lo))
    } else {
        (hi, lo)
    };
    lo.reverse();
    hi.append(&mut lo);
    hi
}

/// Distinguishable colours (Okabe–Ito palette, colour-blind safe), cycled.
const PALETTE: [RGBColor; 8] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(230, 159, 0),
    RGBColor(86, 180, 233),
    RGBColor(0, 0, 0),
    RGBColor(240, 228, 66),
];

/// Draws `series` as lines (with point markers, or as step functions) and their bands into an
/// SVG file at `path` (width × height pixels), with a title, axis labels and a legend; `hline`
/// adds a dashed horizontal reference line (e.g. a target metric) with its label.
///
/// # Errors
/// If the file cannot be written, or no series has a point.
#[allow(clippy::too_many_arguments)]
pub fn line_plot_svg(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
    hline: Option<(f64, &str)>,
    size: (u32, u32),
) -> Result<()> {
    let pts = series.iter().flat_map(|s| {
        let band = s.band.iter().flat_map(|&(x, l, h)| [(x, l), (x, h)]);
        s.points.iter().copied().chain(band)
    });
    let (mut x1, mut y0, mut y1) = (0f64, f64::INFINITY, f64::NEG_INFINITY);
    for (x, y) in pts.filter(|p| p.0.is_finite() && p.1.is_finite()) {
        x1 = x1.max(x);
        y0 = y0.min(y);
        y1 = y1.max(y);
    }
    if !y0.is_finite() {
        return Err(anyhow!("{}: nothing to plot", path.display()));
    }
    if let Some((h, _)) = hline {
        y0 = y0.min(h);
        y1 = y1.max(h);
    }
    let pad = ((y1 - y0) * 0.05).max(1e-3);
    let (y0, y1) = (y0 - pad, y1 + pad);
    let x1 = (x1 * 1.02).max(1e-3);
    let err = |e: &dyn std::fmt::Display| anyhow!("drawing {}: {e}", path.display());

    let root = SVGBackend::new(path, size).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(56)
        .build_cartesian_2d(0f64..x1, y0..y1)
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .x_desc(x_label)
        .y_desc(y_label)
        .light_line_style(RGBColor(235, 235, 235))
        .draw()
        .map_err(|e| err(&e))?;
    // the bands first, so that every line stays visible over them
    for (i, s) in series.iter().enumerate() {
        let fill = PALETTE[i % PALETTE.len()].mix(0.18).filled();
        let finite = |b: &(f64, f64, f64)| b.0.is_finite() && b.1.is_finite() && b.2.is_finite();
        for part in finite_runs(&s.band, finite) {
            chart
                .draw_series(std::iter::once(Polygon::new(
                    band_outline(&part, s.step),
                    fill,
                )))
                .map_err(|e| err(&e))?;
        }
    }
    for (i, s) in series.iter().enumerate() {
        let c = PALETTE[i % PALETTE.len()];
        let style = ShapeStyle::from(&c).stroke_width(2);
        let finite = |p: &(f64, f64)| p.0.is_finite() && p.1.is_finite();
        for (k, part) in finite_runs(&s.points, finite).into_iter().enumerate() {
            let drawn = if s.step { steps(&part) } else { part.clone() };
            let line = chart
                .draw_series(LineSeries::new(drawn, style))
                .map_err(|e| err(&e))?;
            if k == 0 {
                line.label(s.label.as_str())
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], style));
            }
            if !s.step {
                chart
                    .draw_series(
                        part.iter()
                            .map(|&p| Circle::new(p, 2, ShapeStyle::from(&c).filled())),
                    )
                    .map_err(|e| err(&e))?;
            }
        }
    }
    if let Some((h, label)) = hline {
        let grey = RGBColor(120, 120, 120);
        let dashes: Vec<(f64, f64)> = (0..40)
            .map(|i| x1 * i as f64 / 40.0)
            .flat_map(|x| [(x, h), (x + x1 / 100.0, h)])
            .collect();
        chart
            .draw_series(
                dashes
                    .chunks(2)
                    .map(|d| PathElement::new(d.to_vec(), ShapeStyle::from(&grey))),
            )
            .map_err(|e| err(&e))?
            .label(label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], grey));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_an_svg_with_every_label() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.svg");
        let s = vec![
            Series {
                label: "random-tma".into(),
                points: vec![(1.0, 0.5), (2.0, 0.7)],
                step: false,
                band: Vec::new(),
            },
            Series {
                label: "psgd-pa".into(),
                points: vec![(1.0, 0.4), (2.0, 0.6)],
                step: true,
                band: vec![(1.0, 0.3, 0.5), (2.0, 0.55, 0.65)],
            },
        ];
        line_plot_svg(
            &p,
            "t",
            "seconds",
            "mrr",
            &s,
            Some((0.65, "target")),
            (400, 300),
        )
        .unwrap();
        let text = std::fs::read_to_string(&p).unwrap();
        assert!(text.starts_with("<svg"), "{}", &text[..40]);
        for l in ["random-tma", "psgd-pa", "target", "seconds", "mrr"] {
            assert!(text.contains(l), "{l} missing");
        }
        // the band is one filled polygon
        assert_eq!(text.matches("<polygon").count(), 1, "{text}");
        assert!(line_plot_svg(&p, "t", "x", "y", &[], None, (400, 300)).is_err());
    }

    #[test]
    fn a_step_line_holds_each_value_and_its_band_outlines_both_edges() {
        assert_eq!(
            steps(&[(1.0, 0.5), (2.0, 0.7), (4.0, 0.6)]),
            [(1.0, 0.5), (2.0, 0.5), (2.0, 0.7), (4.0, 0.7), (4.0, 0.6)]
        );
        assert_eq!(
            band_outline(&[(1.0, 0.1, 0.3), (2.0, 0.2, 0.4)], true),
            [
                (1.0, 0.3),
                (2.0, 0.3),
                (2.0, 0.4),
                (2.0, 0.2),
                (2.0, 0.1),
                (1.0, 0.1)
            ]
        );
        let runs = finite_runs(&[1.0, f64::NAN, 2.0, 3.0, f64::NAN], |x: &f64| {
            x.is_finite()
        });
        assert_eq!(runs, [vec![1.0], vec![2.0, 3.0]]);
    }
}
