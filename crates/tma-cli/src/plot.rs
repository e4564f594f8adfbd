//! Line plots as SVG (plotters' SVG backend: no font files or system libraries needed; text
//! is written as SVG `<text>` and laid out by the viewer).

use anyhow::{anyhow, Result};
use plotters::prelude::*;
use std::path::Path;

/// One line of a plot: a label and its `(x, y)` points in drawing order.
pub struct Series {
    pub label: String,
    pub points: Vec<(f64, f64)>,
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

/// Draws `series` as lines with point markers into an SVG file at `path` (width × height
/// pixels), with a title, axis labels and a legend; `hline` adds a dashed horizontal reference
/// line (e.g. a target metric) with its label.
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
    let pts = series.iter().flat_map(|s| s.points.iter());
    let (mut x1, mut y0, mut y1) = (0f64, f64::INFINITY, f64::NEG_INFINITY);
    for &(x, y) in pts.filter(|p| p.0.is_finite() && p.1.is_finite()) {
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
    for (i, s) in series.iter().enumerate() {
        let c = PALETTE[i % PALETTE.len()];
        let style = ShapeStyle::from(&c).stroke_width(2);
        chart
            .draw_series(LineSeries::new(s.points.iter().copied(), style))
            .map_err(|e| err(&e))?
            .label(s.label.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], style));
        chart
            .draw_series(
                s.points
                    .iter()
                    .map(|&p| Circle::new(p, 2, ShapeStyle::from(&c).filled())),
            )
            .map_err(|e| err(&e))?;
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
            },
            Series {
                label: "psgd-pa".into(),
                points: vec![(1.0, 0.4), (2.0, 0.6)],
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
        assert!(line_plot_svg(&p, "t", "x", "y", &[], None, (400, 300)).is_err());
    }
}
