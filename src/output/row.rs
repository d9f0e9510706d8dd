//! The one result model: every command's rows are structs that derive
//! `Serialize` (their JSON object) and list their table columns in one
//! place, each column naming its heading, the JSON field it shows and how
//! its cell is printed. The text table, the CSV and the JSON all come from
//! those rows, so the three cannot drift apart.

use std::borrow::Cow;

use serde::Serialize;

use super::us;
use crate::report::Sink;

/// How a column's cell is printed from a row.
type CellFn<R> = Box<dyn Fn(&R) -> String>;

/// One printed column of a row type.
pub struct Column<R> {
    /// The heading, with its unit (`p50[us]`).
    pub head: Cow<'static, str>,
    /// The JSON key whose value the cell shows (in another unit, perhaps);
    /// `None` for a cell derived from several fields.
    pub field: Option<Cow<'static, str>>,
    cell: CellFn<R>,
}

impl<R> Column<R> {
    /// A column showing `field`, printed by `cell`.
    pub fn new(
        head: impl Into<Cow<'static, str>>,
        field: impl Into<Cow<'static, str>>,
        cell: impl Fn(&R) -> String + 'static,
    ) -> Column<R> {
        Column {
            head: head.into(),
            field: Some(field.into()),
            cell: Box::new(cell),
        }
    }
    /// A column whose cell combines fields (no single JSON key).
    pub fn derived(
        head: impl Into<Cow<'static, str>>,
        cell: impl Fn(&R) -> String + 'static,
    ) -> Column<R> {
        Column {
            head: head.into(),
            field: None,
            cell: Box::new(cell),
        }
    }
    pub fn cell(&self, row: &R) -> String {
        (self.cell)(row)
    }
}

impl<R: 'static> Column<R> {
    /// A column showing `field`, a time kept in ns, printed in µs with
    /// `decimals` decimals.
    pub fn micros(
        head: &'static str,
        field: &'static str,
        decimals: usize,
        ns: fn(&R) -> f64,
    ) -> Column<R> {
        Column::new(head, field, move |r: &R| us(ns(r), decimals))
    }
}

/// A result row: its JSON object is its `Serialize` form, its table
/// columns come from [`Row::columns`].
pub trait Row: Serialize + Sized {
    /// What the columns depend on beyond the row type (window kind, rank
    /// counts); `()` for a [`FixedRow`].
    type Layout;
    fn columns(layout: &Self::Layout) -> Vec<Column<Self>>;
}

/// A row whose columns depend on nothing but its type (most rows): its
/// [`Row`] layout is `()`.
pub trait FixedRow: Serialize + Sized {
    fn columns() -> Vec<Column<Self>>;
}

impl<R: FixedRow> Row for R {
    type Layout = ();
    fn columns(_: &()) -> Vec<Column<R>> {
        <R as FixedRow>::columns()
    }
}

/// A table of `R` rows being written to a sink: the heading at
/// [`Table::start`], then each row's cells and JSON from the same columns.
pub struct Table<R: Row> {
    columns: Vec<Column<R>>,
}

impl<R: Row> Table<R> {
    /// Print the title and headings.
    pub fn start(sink: &mut dyn Sink, title: &str, layout: &R::Layout) -> Table<R> {
        let t = Table::quiet(layout);
        t.heading(sink, title);
        t
    }
    /// Print the title and headings (again, after other tables).
    pub fn heading(&self, sink: &mut dyn Sink, title: &str) {
        let heads: Vec<&str> = self.columns.iter().map(|c| c.head.as_ref()).collect();
        sink.table(title, &heads);
    }
    /// The columns without printing anything (for a row under a table
    /// started elsewhere).
    pub fn quiet(layout: &R::Layout) -> Table<R> {
        Table {
            columns: R::columns(layout),
        }
    }
    /// The printed cells of `row`, in column order.
    pub fn cells(&self, row: &R) -> Vec<String> {
        self.columns.iter().map(|c| c.cell(row)).collect()
    }
    /// Print and export one row.
    pub fn add(&self, sink: &mut dyn Sink, row: &R) {
        sink.row(&self.cells(row), to_json(row));
    }
    pub fn add_rows(&self, sink: &mut dyn Sink, rows: &[R]) {
        for r in rows {
            self.add(sink, r);
        }
    }
    pub fn columns(&self) -> &[Column<R>] {
        &self.columns
    }
}

/// A row's JSON object.
pub fn to_json<T: Serialize>(row: &T) -> serde_json::Value {
    serde_json::to_value(row).expect("result rows always serialise")
}

/// Every column's `field` is a key of `row`'s JSON, else the name of the
/// first that is not (for the tests of each row type).
pub fn check_fields<R: Row>(layout: &R::Layout, row: &R) -> Result<(), String> {
    let json = to_json(row);
    for c in R::columns(layout) {
        if let Some(f) = &c.field {
            if json.get(f.as_ref()).is_none() {
                return Err(format!("column {} shows `{f}`, not in {json}", c.head));
            }
        }
    }
    Ok(())
}
