//! The transport contract stays slim: `Transport` and its sub-traits have
//! at most 20 methods in all, at most 14 of them required, and no default
//! body answers `Unsupported` (a transport that must act cannot inherit a
//! refusal). Counted from the source of `src/transport.rs`.

const SOURCE: &str = include_str!("../src/transport.rs");
const TRAITS: &[&str] = &["pub trait Transport", "pub trait Tagged"];

/// One trait method: its name and, for a provided one, its default body.
struct Method {
    name: String,
    body: Option<String>,
}

/// The text between the brace that opens at `open` and its match.
fn block(src: &str, open: usize) -> &str {
    let mut depth = 0usize;
    for (i, c) in src[open..].char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return &src[open + 1..open + i];
                }
            }
            _ => {}
        }
    }
    panic!("unbalanced braces in transport.rs");
}

/// The methods of the trait whose body is `body` (comments dropped).
fn methods(body: &str) -> Vec<Method> {
    let text: String = body
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .map(|l| format!("{l}\n"))
        .collect();
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(i) = text[at..].find("fn ") {
        let start = at + i;
        let name: String = text[start + 3..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        // The signature ends at the first `;` (required) or `{` (provided)
        // outside parentheses.
        let mut depth = 0i32;
        let mut end = None;
        for (j, c) in text[start..].char_indices() {
            match c {
                '(' | '<' => depth += 1,
                ')' | '>' if depth > 0 => depth -= 1,
                ';' | '{' if depth == 0 => {
                    end = Some((start + j, c));
                    break;
                }
                _ => {}
            }
        }
        let (j, c) = end.expect("a method signature without an end");
        if c == ';' {
            out.push(Method { name, body: None });
            at = j + 1;
        } else {
            let b = block(&text, j);
            out.push(Method {
                name,
                body: Some(b.to_string()),
            });
            at = j + b.len() + 2;
        }
    }
    out
}

fn contract() -> Vec<(String, Vec<Method>)> {
    TRAITS
        .iter()
        .map(|t| {
            let at = SOURCE
                .find(t)
                .unwrap_or_else(|| panic!("`{t}` not found in transport.rs"));
            let open = at + SOURCE[at..].find('{').expect("trait body");
            (t.to_string(), methods(block(SOURCE, open)))
        })
        .collect()
}

#[test]
fn the_contract_has_at_most_20_methods_14_required() {
    let c = contract();
    let all: Vec<&Method> = c.iter().flat_map(|(_, m)| m).collect();
    let required: Vec<&str> = all
        .iter()
        .filter(|m| m.body.is_none())
        .map(|m| m.name.as_str())
        .collect();
    let names: Vec<&str> = all.iter().map(|m| m.name.as_str()).collect();
    assert!(
        required.contains(&"post_send") && names.contains(&"tsend"),
        "the parser lost methods: {names:?}"
    );
    assert!(
        all.len() <= 20,
        "{} methods in Transport and its sub-traits (at most 20): {names:?}",
        all.len()
    );
    assert!(
        required.len() <= 14,
        "{} required methods (at most 14): {required:?}",
        required.len()
    );
}

#[test]
fn no_default_body_answers_unsupported() {
    for (t, ms) in contract() {
        for m in ms {
            if let Some(b) = &m.body {
                assert!(
                    !b.contains("Unsupported"),
                    "{t}::{}'s default body refuses with Unsupported: a transport that must act would inherit it",
                    m.name
                );
            }
        }
    }
}

#[test]
fn the_parser_tells_required_from_provided() {
    let ms = methods(
        "fn a(&self) -> u8;\n fn b(&mut self, x: Option<&mut dyn X>) -> Result<(), E> { let _ = x; Ok(()) }\n // fn c();\n fn d<T>(&self, t: T) -> Vec<u8>;",
    );
    let shape: Vec<(&str, bool)> = ms
        .iter()
        .map(|m| (m.name.as_str(), m.body.is_some()))
        .collect();
    assert_eq!(shape, [("a", false), ("b", true), ("d", false)]);
}
