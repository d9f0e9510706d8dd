//! The aligned table on stdout: rows are printed as they are measured, so
//! the column widths are fixed from the headings (at least
//! [`MIN_WIDTH`] characters, right-aligned, like OSU's and perftest's).

/// Narrowest column.
pub const MIN_WIDTH: usize = 10;

/// Formats one table's lines.
#[derive(Debug, Clone, Default)]
pub struct TableFormat {
    widths: Vec<usize>,
}

impl TableFormat {
    pub fn new(columns: &[&str]) -> TableFormat {
        TableFormat {
            widths: columns.iter().map(|c| c.len().max(MIN_WIDTH)).collect(),
        }
    }
    /// The heading line (`#` first, so tools reading the numbers skip it).
    pub fn heading(&self, columns: &[&str]) -> String {
        let mut s = self.line(columns.iter().copied());
        s.replace_range(0..1, "#");
        s
    }
    /// One row; cells wider than their column push the rest right.
    pub fn row(&self, cells: &[String]) -> String {
        self.line(cells.iter().map(|s| s.as_str()))
    }
    fn line<'a>(&self, cells: impl Iterator<Item = &'a str>) -> String {
        let mut s = String::new();
        for (i, c) in cells.enumerate() {
            let w = self.widths.get(i).copied().unwrap_or(MIN_WIDTH);
            s.push_str(&format!(" {c:>w$}"));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::us;

    #[test]
    fn columns_line_up() {
        let cols = ["size[B]", "iters", "p50[us]", "p99.9[us]"];
        let t = TableFormat::new(&cols);
        let h = t.heading(&cols);
        let r = t.row(&["1024".into(), "10000".into(), us(1234.0, 2), us(99990.0, 2)]);
        assert!(h.starts_with('#'));
        assert_eq!(h.len(), r.len());
        assert!(r.ends_with("  99.99"), "{r}");
        assert!(r.contains(" 1.23"), "{r}");
        // Each heading ends where its cells end.
        let end = |line: &str, needle: &str| line.find(needle).unwrap() + needle.len();
        assert_eq!(end(&h, "p50[us]"), end(&r, "1.23"));
    }
}
