//! A short line diff for expected-vs-actual reports.

/// Lines of context around each change.
const CONTEXT: usize = 2;
/// Output lines before the diff is cut.
const MAX_LINES: usize = 40;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Same,
    Del,
    Add,
}

/// A unified-style diff of `expected` (`-`) against `actual` (`+`), with a
/// little context, cut after [`MAX_LINES`] lines. Empty when equal.
pub(crate) fn line_diff(expected: &str, actual: &str) -> String {
    if expected == actual {
        return String::new();
    }
    let a: Vec<&str> = expected.lines().collect();
    let b: Vec<&str> = actual.lines().collect();
    let ops = diff_ops(&a, &b);
    let mut out = Vec::new();
    // Keep only changes and CONTEXT lines around them.
    let changed: Vec<bool> = ops.iter().map(|(op, _)| *op != Op::Same).collect();
    let near = |i: usize| {
        let lo = i.saturating_sub(CONTEXT);
        let hi = (i + CONTEXT + 1).min(changed.len());
        changed.get(lo..hi).is_some_and(|w| w.iter().any(|c| *c))
    };
    let mut skipped = false;
    let mut line_a = 0usize;
    for (i, (op, text)) in ops.iter().enumerate() {
        if *op != Op::Add {
            line_a += 1;
        }
        if !near(i) {
            skipped = true;
            continue;
        }
        if skipped || out.is_empty() {
            out.push(format!("@@ expected line {line_a} @@"));
            skipped = false;
        }
        let sign = match op {
            Op::Same => ' ',
            Op::Del => '-',
            Op::Add => '+',
        };
        out.push(format!("{sign}{text}"));
        // After a one-line change of a long line, point at the first difference.
        let prev = i.checked_sub(1).and_then(|p| ops.get(p));
        let before = i.checked_sub(2).and_then(|p| ops.get(p));
        let next = ops.get(i + 1);
        if let Some((Op::Del, old)) = prev
            && *op == Op::Add
            && before.is_none_or(|(o, _)| *o != Op::Del)
            && next.is_none_or(|(o, _)| *o != Op::Add)
            && old.len().max(text.len()) > 80
        {
            out.push(first_difference(old, text));
        }
    }
    if expected.ends_with('\n') != actual.ends_with('\n') {
        out.push("(the files differ in their final newline)".to_owned());
    }
    if out.len() > MAX_LINES {
        let more = out.len() - MAX_LINES;
        out.truncate(MAX_LINES);
        out.push(format!("... {more} more diff lines"));
    }
    let mut text = String::from("--- expected\n+++ actual\n");
    for line in out {
        text.push_str(&line);
        text.push('\n');
    }
    text
}

/// `? column N: expected "..", got ".."` around the first differing character.
fn first_difference(old: &str, new: &str) -> String {
    let at = old
        .char_indices()
        .zip(new.chars())
        .find(|((_, a), b)| a != b)
        .map_or_else(|| old.len().min(new.len()), |((i, _), _)| i);
    let window = |s: &str| {
        let mut start = at.saturating_sub(20).min(s.len());
        while !s.is_char_boundary(start) {
            start -= 1;
        }
        let mut end = (at + 40).min(s.len());
        while !s.is_char_boundary(end) {
            end += 1;
        }
        let prefix = if start > 0 { "…" } else { "" };
        let suffix = if end < s.len() { "…" } else { "" };
        format!("{prefix}{}{suffix}", s.get(start..end).unwrap_or_default())
    };
    let column = old.get(..at).map_or(at, |p| p.chars().count()) + 1;
    format!("? column {column}: expected {:?}, got {:?}", window(old), window(new))
}

/// An edit script by longest common subsequence; falls back to "all removed,
/// all added" after the common prefix and suffix when the inputs are huge.
fn diff_ops<'a>(a: &[&'a str], b: &[&'a str]) -> Vec<(Op, &'a str)> {
    let prefix = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let a_rest = a.get(prefix..).unwrap_or_default();
    let b_rest = b.get(prefix..).unwrap_or_default();
    let suffix = a_rest.iter().rev().zip(b_rest.iter().rev()).take_while(|(x, y)| x == y).count();
    let a_mid = a_rest.get(..a_rest.len() - suffix).unwrap_or_default();
    let b_mid = b_rest.get(..b_rest.len() - suffix).unwrap_or_default();

    let mut ops: Vec<(Op, &str)> =
        a.get(..prefix).unwrap_or_default().iter().map(|l| (Op::Same, *l)).collect();
    let (n, m) = (a_mid.len(), b_mid.len());
    if n.saturating_mul(m) > 4_000_000 {
        ops.extend(a_mid.iter().map(|l| (Op::Del, *l)));
        ops.extend(b_mid.iter().map(|l| (Op::Add, *l)));
    } else {
        // lcs[i][j] = LCS length of a_mid[i..] and b_mid[j..], flattened.
        let width = m + 1;
        let mut lcs = vec![0u32; (n + 1) * width];
        for i in (0..n).rev() {
            for j in (0..m).rev() {
                let value = if a_mid.get(i) == b_mid.get(j) {
                    lcs.get((i + 1) * width + j + 1).copied().unwrap_or(0) + 1
                } else {
                    let down = lcs.get((i + 1) * width + j).copied().unwrap_or(0);
                    let right = lcs.get(i * width + j + 1).copied().unwrap_or(0);
                    down.max(right)
                };
                if let Some(cell) = lcs.get_mut(i * width + j) {
                    *cell = value;
                }
            }
        }
        let (mut i, mut j) = (0, 0);
        while i < n || j < m {
            let (ai, bj) = (a_mid.get(i), b_mid.get(j));
            if let (Some(x), Some(y)) = (ai, bj)
                && x == y
            {
                ops.push((Op::Same, *x));
                i += 1;
                j += 1;
                continue;
            }
            let down = lcs.get((i + 1) * width + j).copied().unwrap_or(0);
            let right = lcs.get(i * width + j + 1).copied().unwrap_or(0);
            match (ai, bj) {
                (Some(x), Some(_)) if down >= right => {
                    ops.push((Op::Del, *x));
                    i += 1;
                }
                (_, Some(y)) => {
                    ops.push((Op::Add, *y));
                    j += 1;
                }
                (Some(x), None) => {
                    ops.push((Op::Del, *x));
                    i += 1;
                }
                (None, None) => break,
            }
        }
    }
    ops.extend(
        a_rest.get(a_rest.len() - suffix..).unwrap_or_default().iter().map(|l| (Op::Same, *l)),
    );
    ops
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_inputs_give_nothing() {
        assert_eq!(line_diff("a\nb\n", "a\nb\n"), "");
    }

    #[test]
    fn shows_changed_line_with_context() {
        let d = line_diff("1\n2\n3\n4\n5\n6\n7\n", "1\n2\n3\nX\n5\n6\n7\n");
        assert_eq!(d, "--- expected\n+++ actual\n@@ expected line 2 @@\n 2\n 3\n-4\n+X\n 5\n 6\n");
    }

    #[test]
    fn points_at_the_first_difference_in_long_lines() {
        let old = format!("message {}\"id\":\"abc\"", "x".repeat(100));
        let new = format!("message {}\"id\":\"abd\"", "x".repeat(100));
        let d = line_diff(&format!("{old}\n"), &format!("{new}\n"));
        assert!(
            d.contains("? column 117: expected \"…xxxxxxxxxxxx\\\"id\\\":\\\"abc\\\"\""),
            "{d}"
        );
    }

    #[test]
    fn insertion_and_deletion() {
        let d = line_diff("a\nb\nc\n", "a\nc\nd\n");
        assert!(d.contains("-b\n"), "{d}");
        assert!(d.contains("+d\n"), "{d}");
        assert!(!d.contains("-c"), "{d}");
    }
}
