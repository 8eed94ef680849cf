//! `spillway plot`: draws a `--metrics` file (JSON lines, see
//! [`crate::engine::observe::Sample`]) as one SVG with three panels: states over time, RSS
//! over time (with the `--memory` budget), and the size of each BFS level (or, for DFS, the
//! stack depth over time).
//!
//! Only the SVG backend of `plotters` is built: the SVG names its fonts and the viewer
//! renders the text, so no font files or fontconfig are needed to draw.

use crate::error::PlotError;
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::Path;

/// The keys of a metrics line the plot needs; other keys are ignored, so files from later
/// versions with more keys still plot.
#[derive(Debug, serde::Deserialize)]
struct Point {
    wall_seconds: f64,
    states: u64,
    rss_bytes: u64,
    memory_limit_bytes: Option<u64>,
    order: String,
    level: u64,
    level_states: Option<u64>,
}

/// Reads the metrics file `input` and writes the plot to `output`.
pub fn plot_file(input: &Path, output: &Path) -> Result<(), PlotError> {
    // The SVG would replace the metrics it was drawn from (its temporary file has a new,
    // random name: the output is its own only companion to check).
    crate::files::check_output(input, output, output)?;
    let bytes = std::fs::read(input).map_err(|source| PlotError::Io {
        path: input.to_path_buf(),
        source,
    })?;
    let points = parse(input, text(input, &bytes)?)?;
    let svg = render(&points).map_err(|message| PlotError::Draw {
        path: output.to_path_buf(),
        message,
    })?;
    // Through a temporary file renamed into place: a failed write keeps the previous plot.
    crate::files::write_atomically(output, svg.as_bytes()).map_err(|source| PlotError::Io {
        path: output.to_path_buf(),
        source,
    })
}

/// The metrics file as text: bytes that are not UTF-8 make it malformed (exit 3, its line
/// named), as any other line that is not a metrics line, not an I/O error.
fn text<'a>(path: &Path, bytes: &'a [u8]) -> Result<&'a str, PlotError> {
    std::str::from_utf8(bytes).map_err(|e| {
        let at = e.valid_up_to();
        PlotError::Malformed {
            path: path.to_path_buf(),
            line: crate::error::line_col(bytes, at).0,
            message: format!(
                "not a metrics line: byte 0x{:02x} is not valid UTF-8 (a metrics file is text)",
                bytes[at]
            ),
        }
    })
}

fn parse(path: &Path, text: &str) -> Result<Vec<Point>, PlotError> {
    let malformed = |line: usize, message: String| PlotError::Malformed {
        path: path.to_path_buf(),
        line,
        message,
    };
    let mut points = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let p: Point = serde_json::from_str(line)
            .map_err(|e| malformed(i + 1, format!("not a metrics line: {e}")))?;
        if !(p.wall_seconds.is_finite() && p.wall_seconds >= 0.0) {
            return Err(malformed(
                i + 1,
                format!("wall_seconds is {}, not a time", p.wall_seconds),
            ));
        }
        // A resumed leg appends to its run's file, its clock starting again at the time of
        // the checkpoint it resumed from: what the earlier leg did after that checkpoint was
        // lost, so its lines give way to the resumed leg's (the plot shows one run).
        while points
            .last()
            .is_some_and(|q: &Point| q.wall_seconds > p.wall_seconds)
        {
            points.pop();
        }
        points.push(p);
    }
    if points.is_empty() {
        return Err(malformed(
            1,
            "no metrics lines (is this a file written by --metrics?)".into(),
        ));
    }
    Ok(points)
}

/// The third panel's colour: plotters' GREEN is too light to read on white.
const LEVELS: RGBColor = RGBColor(0, 128, 0);

/// An axis label for a count: `1.5M`, `250k`, `12` (the default `1000000.0` is unreadable).
fn count(v: f64) -> String {
    let a = v.abs();
    if a >= 1e9 {
        format!("{:.1}G", v / 1e9)
    } else if a >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.0}k", v / 1e3)
    } else {
        format!("{v:.0}")
    }
}

/// A range from 0 to a little above `max`, never empty (plotters needs a non-empty span).
fn span(max: f64) -> std::ops::Range<f64> {
    0.0..if max > 0.0 { max * 1.05 } else { 1.0 }
}

/// A chart on `area` over `x` by `y`, with the caption size, margin and axis room every panel
/// of the report shares.
fn panel<'a, 'b>(
    area: &'a DrawingArea<SVGBackend<'b>, Shift>,
    caption: &str,
    x: std::ops::Range<f64>,
    y: std::ops::Range<f64>,
) -> Result<ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>, String> {
    ChartBuilder::on(area)
        .caption(caption, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(80)
        .build_cartesian_2d(x, y)
        .map_err(|e| e.to_string())
}

/// A panel of a count over wall time (states, DFS stack depth), counts written short on the
/// y axis; `y` is the axis description and the count.
fn count_over_time(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    caption: &str,
    y: (&str, fn(&Point) -> u64),
    points: &[Point],
    t_max: f64,
    color: &RGBColor,
) -> Result<(), String> {
    let (y_desc, value) = y;
    let y_max = points.iter().map(value).max().unwrap_or(0) as f64;
    let mut c = panel(area, caption, span(t_max), span(y_max))?;
    c.configure_mesh()
        .x_desc("wall seconds")
        .y_desc(y_desc)
        .y_label_formatter(&|v| count(*v))
        .draw()
        .map_err(|e| e.to_string())?;
    c.draw_series(LineSeries::new(
        points.iter().map(|p| (p.wall_seconds, value(p) as f64)),
        color,
    ))
    .map_err(|e| e.to_string())?;
    Ok(())
}

fn render(points: &[Point]) -> Result<String, String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (900, 960)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let panels = root.split_evenly((3, 1));
        let t_max = points.iter().map(|p| p.wall_seconds).fold(0.0, f64::max);
        let mib = |b: u64| b as f64 / (1u64 << 20) as f64;

        // States over time.
        count_over_time(
            &panels[0],
            "states over time",
            ("states", |p| p.states),
            points,
            t_max,
            &BLUE,
        )?;

        // RSS over time, under the budget when there is one.
        let limit = points.iter().filter_map(|p| p.memory_limit_bytes).max();
        let r_max = points
            .iter()
            .map(|p| mib(p.rss_bytes))
            .fold(limit.map_or(0.0, mib), f64::max);
        let mut c = panel(
            &panels[1],
            "resident memory over time",
            span(t_max),
            span(r_max),
        )?;
        c.configure_mesh()
            .x_desc("wall seconds")
            .y_desc("RSS (MiB)")
            .draw()
            .map_err(|e| e.to_string())?;
        c.draw_series(LineSeries::new(
            points.iter().map(|p| (p.wall_seconds, mib(p.rss_bytes))),
            &RED,
        ))
        .map_err(|e| e.to_string())?
        .label("RSS")
        .legend(|(x, y)| PathElement::new([(x, y), (x + 16, y)], RED));
        if let Some(l) = limit {
            c.draw_series(LineSeries::new(
                [(0.0, mib(l)), (span(t_max).end, mib(l))],
                BLACK.stroke_width(1),
            ))
            .map_err(|e| e.to_string())?
            .label("--memory")
            .legend(|(x, y)| PathElement::new([(x, y), (x + 16, y)], BLACK));
        }
        c.configure_series_labels()
            .border_style(BLACK)
            .background_style(WHITE.mix(0.8))
            .draw()
            .map_err(|e| e.to_string())?;

        // BFS: states per level (a level's size is known from its first line on); DFS: the
        // stack depth over time.
        let bfs: Vec<(u64, u64)> = {
            let mut levels: Vec<(u64, u64)> = Vec::new();
            for p in points.iter().filter(|p| p.order == "bfs") {
                if let Some(n) = p.level_states {
                    match levels.iter_mut().find(|(l, _)| *l == p.level) {
                        Some(e) => e.1 = e.1.max(n),
                        None => levels.push((p.level, n)),
                    }
                }
            }
            levels.sort_unstable();
            levels
        };
        if !bfs.is_empty() {
            let l_max = bfs.iter().map(|&(l, _)| l).max().unwrap_or(0) as f64;
            let n_max = bfs.iter().map(|&(_, n)| n).max().unwrap_or(0) as f64;
            let mut c = panel(
                &panels[2],
                "states per BFS level (levels sampled)",
                span(l_max),
                span(n_max),
            )?;
            c.configure_mesh()
                .x_desc("BFS level")
                .y_desc("states in the level")
                .x_label_formatter(&|v| format!("{v:.0}"))
                .y_label_formatter(&|v| count(*v))
                .draw()
                .map_err(|e| e.to_string())?;
            c.draw_series(LineSeries::new(
                bfs.iter().map(|&(l, n)| (l as f64, n as f64)),
                &LEVELS,
            ))
            .map_err(|e| e.to_string())?;
        } else {
            count_over_time(
                &panels[2],
                "DFS stack depth over time",
                ("depth", |p| p.level),
                points,
                t_max,
                &LEVELS,
            )?;
        }
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn malformed_lines_are_named_and_empty_files_refused() {
        let p = Path::new("m.jsonl");
        let good = r#"{"wall_seconds":0.5,"states":10,"rss_bytes":1048576,"memory_limit_bytes":null,"order":"bfs","level":1,"level_states":4}"#;
        assert_eq!(parse(p, &format!("{good}\n\n{good}\n")).unwrap().len(), 2);
        let e = parse(p, &format!("{good}\n{{\"wall_seconds\":1\n")).unwrap_err();
        assert!(e.to_string().starts_with("m.jsonl:2: "), "{e}");
        assert_eq!(e.exit_code(), crate::error::exit::MODEL);
        let e = parse(p, "\n").unwrap_err();
        assert!(e.to_string().contains("no metrics lines"), "{e}");
        // Bytes that are not UTF-8 on line 3: malformed (exit 3), not an I/O error (4).
        let mut bytes = format!("{good}\n{good}\n").into_bytes();
        bytes.extend_from_slice(b"{\"a\xff\": 1}\n");
        let e = text(p, &bytes).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("m.jsonl:3: not a metrics line: byte 0xff is not valid UTF-8"),
            "{e}"
        );
        assert_eq!(e.exit_code(), crate::error::exit::MODEL);
    }

    #[test]
    fn a_resumed_leg_replaces_what_the_earlier_leg_did_after_its_checkpoint() {
        let line = |t: f64, n: u64| {
            format!(
                r#"{{"wall_seconds":{t},"states":{n},"rss_bytes":1,"memory_limit_bytes":null,"order":"bfs","level":1,"level_states":4}}"#
            )
        };
        // Leg 1 runs to t = 5 (checkpoint at t = 3); leg 2 resumes at t = 3.
        let text = [
            (1.0, 10),
            (3.0, 30),
            (4.0, 40),
            (5.0, 50),
            (3.0, 30),
            (6.0, 60),
        ]
        .map(|(t, n)| line(t, n))
        .join("\n");
        let pts = parse(Path::new("m.jsonl"), &text).unwrap();
        let got: Vec<(f64, u64)> = pts.iter().map(|p| (p.wall_seconds, p.states)).collect();
        assert_eq!(got, [(1.0, 10), (3.0, 30), (3.0, 30), (6.0, 60)]);
    }

    #[test]
    fn renders_every_panel_for_bfs_and_dfs() {
        let line = |t: f64, order: &str, level: u64, n: Option<u64>| Point {
            wall_seconds: t,
            states: (t * 1000.0) as u64,
            rss_bytes: 50 << 20,
            memory_limit_bytes: Some(64 << 20),
            order: order.into(),
            level,
            level_states: n,
        };
        let bfs = render(&[line(0.0, "bfs", 0, Some(1)), line(1.0, "bfs", 3, Some(9))]).unwrap();
        assert!(bfs.starts_with("<svg") && bfs.contains("states per BFS level"));
        // Each series is a polyline of its colour (axes and ticks are black ones): states
        // (blue), RSS (red, and its legend sample), levels (green).
        let lines = |svg: &str, colour: &str| {
            svg.split("<polyline")
                .filter(|p| p.contains(&format!("stroke=\"{colour}\"")))
                .count()
        };
        assert_eq!(lines(&bfs, "#0000FF"), 1, "states");
        assert_eq!(lines(&bfs, "#FF0000"), 2, "RSS");
        assert_eq!(lines(&bfs, "#008000"), 1, "levels");
        let dfs = render(&[line(0.0, "dfs", 1, None)]).unwrap();
        assert!(dfs.contains("DFS stack depth") && !dfs.contains("BFS level"));
        assert_eq!(lines(&dfs, "#008000"), 1, "depth");
    }
}
