//! The docs point into the code as `` `path:line` `` and, for a departure
//! from a method's paper or original program, as
//! `` (`path:line`, `deviation: slug`) ``. Each such line carries (or has
//! within three lines below it) a one-line marker comment
//! `// deviation: slug — why`, so that when code moves this test names
//! where the marker went and the doc can be fixed at once.
//!
//! Checked here, over `docs/**/*.md` and README.md:
//! * every `path:line` names a file of the repository and a line it has;
//! * with a slug, the marker is on that line or at most 3 lines below;
//! * every bullet of a `## Deviations …` section has such a reference;
//! * every marker in the code is referenced by some doc;
//! * the docs never point outside the repository (the team's shared
//!   folder, its design notes, the reference texts).

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

/// How far below the referenced line the marker may sit.
const SLACK: usize = 3;
/// What the marker comment says before its slug.
const MARKER: &str = "deviation: ";
/// Where markers live.
const CODE_DIRS: &[&str] = &["src", "transports", "launcher", "tests"];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn walk(dir: &Path, keep: &dyn Fn(&Path) -> bool, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for p in entries {
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name.starts_with('.') || name == "target" {
            continue;
        }
        if p.is_dir() {
            walk(&p, keep, out);
        } else if keep(&p) {
            out.push(p);
        }
    }
}

/// The pages checked: every markdown file under docs/, and README.md.
fn pages() -> Vec<PathBuf> {
    let mut v = Vec::new();
    walk(
        &root().join("docs"),
        &|p| p.extension().is_some_and(|e| e == "md"),
        &mut v,
    );
    v.push(root().join("README.md"));
    v
}

fn rel(p: &Path) -> String {
    p.strip_prefix(root())
        .unwrap_or(p)
        .to_string_lossy()
        .into_owned()
}

/// One `path:line` reference in a page.
#[derive(Debug, Clone, PartialEq)]
struct Ref {
    /// 1-based line of the page it is on.
    at: usize,
    path: String,
    line: usize,
    slug: Option<String>,
}

/// The code spans of a page: (page line, byte offset of the span's end in
/// the page, content). A span does not cross a line end.
fn spans(text: &str) -> Vec<(usize, usize, usize, String)> {
    let mut out = Vec::new();
    let mut offset = 0;
    for (i, line) in text.split('\n').enumerate() {
        let mut rest = line;
        let mut base = offset;
        while let Some(a) = rest.find('`') {
            // A run of backticks opens a span closed by the same run.
            let ticks = rest[a..].chars().take_while(|&c| c == '`').count();
            let fence = &rest[a..a + ticks];
            let body_start = a + ticks;
            let Some(b) = rest[body_start..].find(fence) else {
                break;
            };
            let body = rest[body_start..body_start + b].trim().to_string();
            let end = body_start + b + ticks;
            out.push((i + 1, base + a, base + end, body));
            base += end;
            rest = &rest[end..];
        }
        offset += line.len() + 1;
    }
    out
}

/// `path:line` when the span is one: a relative path of the repository
/// (letters, digits, `_ . / -`, with an extension) and a line number.
fn as_ref(span: &str) -> Option<(String, usize)> {
    let (path, line) = span.rsplit_once(':')?;
    let line: usize = line.parse().ok()?;
    let ok = !path.is_empty()
        && path.contains('.')
        && !path.starts_with('/')
        && path
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_./-".contains(c));
    ok.then(|| (path.to_string(), line))
}

/// Every reference of a page, with the slug of a `deviation: slug` span
/// that follows it (only `,`, `(` and blanks between them).
fn refs(text: &str) -> Vec<Ref> {
    let sp = spans(text);
    let mut out = Vec::new();
    for (k, (at, _, end, body)) in sp.iter().enumerate() {
        let Some((path, line)) = as_ref(body) else {
            continue;
        };
        let slug = sp.get(k + 1).and_then(|(_, start, _, next)| {
            let between = &text[*end..*start];
            let joined = between.chars().all(|c| c.is_whitespace() || c == ',');
            let s = next.strip_prefix(MARKER)?;
            joined.then(|| s.trim().to_string())
        });
        out.push(Ref {
            at: *at,
            path,
            line,
            slug,
        });
    }
    out
}

/// Whether `line` carries the marker of `slug` (not a longer slug that
/// starts with it).
fn has_marker(line: &str, slug: &str) -> bool {
    let needle = format!("// {MARKER}{slug}");
    line.match_indices(&needle).any(|(i, _)| {
        !line[i + needle.len()..]
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    })
}

/// Every marker in the code: (file, 1-based line, slug).
fn markers() -> Vec<(String, usize, String)> {
    let mut files = Vec::new();
    for d in CODE_DIRS {
        walk(
            &root().join(d),
            &|p| p.extension().is_some_and(|e| e == "rs"),
            &mut files,
        );
    }
    let mut out = Vec::new();
    for f in files {
        if f.ends_with("tests/docs_refs.rs") {
            continue;
        }
        let Ok(text) = fs::read_to_string(&f) else {
            continue;
        };
        for (i, line) in text.lines().enumerate() {
            let Some(p) = line.find("// deviation: ") else {
                continue;
            };
            let slug: String = line[p + "// deviation: ".len()..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
                .collect();
            if !slug.is_empty() {
                out.push((rel(&f), i + 1, slug));
            }
        }
    }
    out
}

/// What is wrong with one reference, if anything. A moved marker is named
/// with the `path:line` to write instead.
fn check(r: &Ref, all_markers: &[(String, usize, String)]) -> Option<String> {
    let file = root().join(&r.path);
    let Ok(text) = fs::read_to_string(&file) else {
        return Some(format!(
            "`{}:{}`: no such file in the repository",
            r.path, r.line
        ));
    };
    let lines: Vec<&str> = text.lines().collect();
    if r.line == 0 || r.line > lines.len() {
        return Some(format!(
            "`{}:{}`: the file has {} lines",
            r.path,
            r.line,
            lines.len()
        ));
    }
    let slug = r.slug.as_deref()?;
    let last = (r.line + SLACK).min(lines.len());
    if lines[r.line - 1..last].iter().any(|l| has_marker(l, slug)) {
        return None;
    }
    // The same file's marker first: a slug may mark lines in several files.
    let same: Vec<&(String, usize, String)> = all_markers
        .iter()
        .filter(|(f, _, s)| s == slug && *f == r.path)
        .collect();
    let found: Vec<String> = if same.is_empty() {
        all_markers.iter().filter(|(_, _, s)| s == slug).collect()
    } else {
        same
    }
    .iter()
    .map(|(f, n, _)| format!("`{f}:{n}`"))
    .collect();
    let here = if found.is_empty() {
        "no `// deviation: {slug}` marker anywhere in the code".replace("{slug}", slug)
    } else {
        format!("the marker is now at {}", found.join(", "))
    };
    Some(format!(
        "`{}:{}` (deviation: {slug}): marker not on lines {}..={}; {here}",
        r.path, r.line, r.line, last
    ))
}

/// The bullets of each `## Deviations …` section: (page line, text).
fn deviation_bullets(text: &str) -> Vec<(usize, String)> {
    let mut out: Vec<(usize, String)> = Vec::new();
    let mut inside = false;
    for (i, line) in text.lines().enumerate() {
        if line.starts_with('#') {
            inside = line.starts_with("## Deviations");
            continue;
        }
        if !inside {
            continue;
        }
        if line.starts_with("- ") || line.starts_with("* ") {
            out.push((i + 1, line.to_string()));
        } else if line.starts_with(' ') && !line.trim().is_empty() {
            if let Some(last) = out.last_mut() {
                last.1.push('\n');
                last.1.push_str(line);
            }
        }
    }
    out
}

/// Paths a page at `page` (relative to the repository root) names that
/// are not in the repository: a relative path climbing out of it, or a
/// document path (`.md`, `.txt`) that no file in it answers. The docs
/// describe outside material in their own words and cite papers by title
/// and authors, so nothing they name lies outside.
fn outside_mentions(text: &str, page: &Path) -> Vec<(usize, String)> {
    let depth = page.parent().map_or(0, |d| d.components().count());
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let words = line.split(|c: char| c.is_whitespace() || "`()[]<>\"',;".contains(c));
        for word in words.map(|w| w.trim_end_matches(['.', ':'])) {
            let climbs = word.matches("../").count();
            let escapes = word.starts_with("../") && climbs > depth;
            let document = word.contains('/')
                && !word.starts_with('/')
                && !word.contains('*')
                && (word.ends_with(".md") || word.ends_with(".txt"));
            let missing = document
                && !root()
                    .join(page.parent().unwrap_or(Path::new("")))
                    .join(word)
                    .exists()
                && !root().join(word).exists();
            if escapes || missing {
                out.push((i + 1, word.to_string()));
            }
        }
    }
    out
}

#[test]
fn the_parser_reads_references_and_slugs() {
    let text = "a (`src/a.rs:12`, `deviation: x-y`) and\n`b/c.md:3` `deviation: no` `d.rs` `x:y`\n";
    let r = refs(text);
    assert_eq!(r.len(), 2, "{r:?}");
    assert_eq!(
        (r[0].at, r[0].path.as_str(), r[0].line, r[0].slug.as_deref()),
        (1, "src/a.rs", 12, Some("x-y"))
    );
    // Not joined by a comma only: a slug span after other words would
    // be a separate mention; here only a blank lies between, so it joins.
    assert_eq!(r[1].slug.as_deref(), Some("no"));
    assert!(has_marker("    // deviation: g0 — why", "g0"));
    assert!(!has_marker("    // deviation: g0-estimator — why", "g0"));
    let page = Path::new("docs/methods/x.md");
    let found: Vec<String> = outside_mentions(
        "see ../../README.md, ../../../beside/x and notes/gone.txt; docs/json.md ok",
        page,
    )
    .into_iter()
    .map(|(_, w)| w)
    .collect();
    assert_eq!(found, ["../../../beside/x", "notes/gone.txt"]);
}

#[test]
fn doc_references_point_at_their_markers() {
    let all_markers = markers();
    let mut problems = Vec::new();
    let mut referenced = BTreeSet::new();
    let mut count = 0;
    for page in pages() {
        let text = fs::read_to_string(&page).expect("read a doc page");
        let name = rel(&page);
        for r in refs(&text) {
            count += 1;
            if let Some(s) = &r.slug {
                referenced.insert(s.clone());
            }
            if let Some(p) = check(&r, &all_markers) {
                problems.push(format!("{name}:{}: {p}", r.at));
            }
        }
        for (at, bullet) in deviation_bullets(&text) {
            if !refs(&bullet).iter().any(|r| r.slug.is_some()) {
                let first = bullet.lines().next().unwrap_or("");
                problems.push(format!(
                    "{name}:{at}: a deviation without (`path:line`, `deviation: slug`): {first}"
                ));
            }
        }
        for (at, what) in outside_mentions(&text, Path::new(&name)) {
            problems.push(format!(
                "{name}:{at}: mentions {what}, which is outside the repository: describe it in the docs' own words"
            ));
        }
    }
    for (f, n, slug) in &all_markers {
        if !referenced.contains(slug) {
            problems.push(format!(
                "`{f}:{n}`: marker `deviation: {slug}` is referenced by no page in docs/"
            ));
        }
    }
    assert!(count > 0, "no `path:line` references found in docs/");
    assert!(
        problems.is_empty(),
        "{} stale doc reference(s):\n  {}",
        problems.len(),
        problems.join("\n  ")
    );
}

#[test]
fn every_method_page_lists_its_deviations() {
    for m in ["overhead", "overlap", "logp", "bcast", "commtest"] {
        let page = root().join(format!("docs/methods/{m}.md"));
        let text = fs::read_to_string(&page).expect("a method page");
        assert!(
            !deviation_bullets(&text).is_empty(),
            "docs/methods/{m}.md has no `## Deviations …` section with bullets"
        );
    }
}
