//! `--svg DIR`: the bench tables drawn as SVG line charts (plotters, SVG backend only).
//!
//! Each chart is a set of named series over a few x values (sizes in MiB, streams at once);
//! the x axis is logarithmic where the values span decades. A value that was not measured
//! (a failed case) leaves a gap in its series.

use std::path::Path;

use plotters::prelude::*;

use crate::{Error, Result};

/// One chart: its title, axes and series of `(x, y)` points.
#[derive(Debug, Clone, Default)]
pub struct Chart {
    /// The title above the plot.
    pub title: String,
    /// What x is.
    pub x_label: String,
    /// What y is.
    pub y_label: String,
    /// Whether x is drawn on a logarithmic scale.
    pub x_log: bool,
    /// Named series, each a list of points.
    pub series: Vec<(String, Vec<(f64, f64)>)>,
}

/// Colours for series, in turn (distinguishable on white, also in grey).
const COLOURS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(23, 190, 207),
];

impl Chart {
    /// Writes the chart to `path` as SVG (900 x 520). A chart with no point is an error.
    pub fn write(&self, path: &Path) -> Result<()> {
        let points = || self.series.iter().flat_map(|(_, p)| p.iter());
        let (mut x_min, mut x_max, mut y_max) = (f64::MAX, f64::MIN, 0f64);
        for &(x, y) in points() {
            x_min = x_min.min(x);
            x_max = x_max.max(x);
            y_max = y_max.max(y);
        }
        if x_min > x_max {
            return Err(Error::Msg(format!("{}: no data to draw", self.title)));
        }
        let fail = |e: &dyn std::fmt::Display| Error::Msg(format!("{}: {e}", path.display()));
        let root = SVGBackend::new(path, (900, 520)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| fail(&e))?;
        let y_range = 0f64..(y_max * 1.15).max(f64::MIN_POSITIVE);
        let mut builder = ChartBuilder::on(&root);
        builder
            .caption(&self.title, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(64);
        if self.x_log {
            let x_range = (x_min / 1.5)..(x_max * 1.5);
            let mut chart =
                builder.build_cartesian_2d(x_range.log_scale(), y_range).map_err(|e| fail(&e))?;
            chart
                .configure_mesh()
                .x_desc(&self.x_label)
                .y_desc(&self.y_label)
                .x_label_formatter(&|x| format!("{x:.0}"))
                .draw()
                .map_err(|e| fail(&e))?;
            self.draw_series(&mut chart).map_err(|e| fail(&e))?;
        } else {
            let pad = ((x_max - x_min) * 0.08).max(0.5);
            let x_range = (x_min - pad)..(x_max + pad);
            let mut chart = builder.build_cartesian_2d(x_range, y_range).map_err(|e| fail(&e))?;
            chart
                .configure_mesh()
                .x_desc(&self.x_label)
                .y_desc(&self.y_label)
                .draw()
                .map_err(|e| fail(&e))?;
            self.draw_series(&mut chart).map_err(|e| fail(&e))?;
        }
        root.present().map_err(|e| fail(&e))?;
        Ok(())
    }

    fn draw_series<'a, X, DB>(
        &self,
        chart: &mut ChartContext<'a, DB, Cartesian2d<X, plotters::coord::types::RangedCoordf64>>,
    ) -> std::result::Result<(), DrawingAreaErrorKind<DB::ErrorType>>
    where
        X: Ranged<ValueType = f64>,
        DB: DrawingBackend + 'a,
    {
        for (k, (name, points)) in self.series.iter().enumerate() {
            let colour = COLOURS.get(k % COLOURS.len()).copied().unwrap_or(BLACK);
            let style =
                if k < COLOURS.len() { colour.stroke_width(2) } else { colour.stroke_width(1) };
            chart
                .draw_series(LineSeries::new(points.iter().copied(), style))?
                .label(name.as_str())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], style));
            chart.draw_series(points.iter().map(|&p| Circle::new(p, 3, colour.filled())))?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.3))
            .draw()
    }
}

/// Creates `dir` and writes each `(file name, chart)` into it; returns the paths written.
pub fn write_all(dir: &Path, charts: &[(&str, Chart)]) -> Result<Vec<std::path::PathBuf>> {
    std::fs::create_dir_all(dir)
        .map_err(|e| Error::Msg(format!("cannot create {}: {e}", dir.display())))?;
    let mut written = Vec::new();
    for (name, chart) in charts {
        let path = dir.join(name);
        chart.write(&path)?;
        written.push(path);
    }
    Ok(written)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "tests")]
mod tests {
    use super::*;

    /// A chart is an SVG document with its title, axis names, series names and one point
    /// marker per value (read back as text, independently of plotters).
    #[test]
    fn a_chart_is_an_svg_with_its_labels_and_points() {
        let dir = std::env::temp_dir().join(format!("xtask-charts-{}", std::process::id()));
        let chart = Chart {
            title: "CPU per stream".into(),
            x_label: "streams at once".into(),
            y_label: "ms".into(),
            x_log: true,
            series: vec![
                ("clawcall stream".into(), vec![(100.0, 0.5), (1000.0, 0.6), (10000.0, 0.7)]),
                ("peer".into(), vec![(100.0, 0.4), (10000.0, 0.8)]),
            ],
        };
        let linear = Chart { x_log: false, title: "CPU per MiB".into(), ..chart.clone() };
        let written = write_all(&dir, &[("a.svg", chart), ("b.svg", linear)]).unwrap();
        for (path, title) in written.iter().zip(["CPU per stream", "CPU per MiB"]) {
            let svg = std::fs::read_to_string(path).unwrap();
            assert!(svg.starts_with("<svg"), "{}", &svg[..40.min(svg.len())]);
            for text in [title, "streams at once", "clawcall stream", "peer"] {
                assert!(svg.contains(text), "{text} missing from {}", path.display());
            }
            assert_eq!(svg.matches("<circle").count(), 5, "{}", path.display());
        }
        assert!(Chart::default().write(&dir.join("empty.svg")).is_err());
        std::fs::remove_dir_all(&dir).ok();
    }
}
