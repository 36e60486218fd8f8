//! SVG plots (plotters, SVG backend only): latency distributions per implementation as CDFs
//! on a logarithmic time axis.

use std::path::Path;

use plotters::prelude::*;

use crate::results::Results;

/// Distinct colours, readable on white.
const COLORS: [RGBColor; 10] = [
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x17, 0xbe, 0xcf),
    RGBColor(0x8c, 0x56, 0x4b),
    RGBColor(0x00, 0x00, 0x00),
    RGBColor(0xe3, 0x77, 0xc2),
    RGBColor(0xbc, 0xbd, 0x22),
];

/// At most this many points per curve.
const POINTS: usize = 400;

/// Draws the CDF of the samples of `plot` for every label that has some; returns whether a
/// file was written.
pub(crate) fn cdf(results: &Results, plot: &str, title: &str, path: &Path) -> Result<bool, String> {
    let series: Vec<(&str, Vec<f64>)> = results
        .samples
        .iter()
        .filter(|((name, _), samples)| *name == plot && !samples.is_empty())
        .map(|((_, label), samples)| {
            let mut sorted: Vec<f64> = samples.iter().map(|us| us.max(1.0)).collect();
            sorted.sort_by(f64::total_cmp);
            (label.as_str(), sorted)
        })
        .collect();
    if series.is_empty() {
        return Ok(false);
    }
    let low = series
        .iter()
        .map(|(_, s)| s[0])
        .fold(f64::INFINITY, f64::min);
    let high = series
        .iter()
        .map(|(_, s)| s[s.len() - 1])
        .fold(0.0, f64::max);
    draw(&series, title, path, (low * 0.8, high * 1.25)).map_err(|e| e.to_string())?;
    Ok(true)
}

fn draw(
    series: &[(&str, Vec<f64>)],
    title: &str,
    path: &Path,
    range: (f64, f64),
) -> Result<(), Box<dyn std::error::Error>> {
    let root = SVGBackend::new(path, (960, 540)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(16)
        .x_label_area_size(44)
        .y_label_area_size(56)
        .build_cartesian_2d((range.0..range.1).log_scale(), 0.0..1.0)?;
    chart
        .configure_mesh()
        .x_desc("latency (µs, log scale)")
        .x_label_formatter(&|us| format!("{us:.0}"))
        .y_desc("fraction of samples at or below")
        .draw()?;
    for (index, (label, sorted)) in series.iter().enumerate() {
        let color = COLORS[index % COLORS.len()];
        let step = (sorted.len() / POINTS).max(1);
        let n = sorted.len() as f64;
        let mut points: Vec<(f64, f64)> = sorted
            .iter()
            .enumerate()
            .step_by(step)
            .map(|(i, us)| (*us, (i + 1) as f64 / n))
            .collect();
        points.push((sorted[sorted.len() - 1], 1.0));
        chart
            .draw_series(LineSeries::new(points, color.stroke_width(2)))?
            .label(format!("{label} (n = {})", sorted.len()))
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}
