//! What an error message may echo of the user's input: a value cut to
//! [`MAX_ECHO`] characters, with control characters (and, in [`value`],
//! non-ASCII ones) escaped, so that one huge or binary argument gives a
//! one-line message, not a 200 KB line or a terminal full of escapes.

/// The most characters of one value a message echoes.
pub const MAX_ECHO: usize = 80;

/// `v` as a message shows it: control and non-ASCII characters escaped
/// (`\u{…}`), cut to [`MAX_ECHO`] characters with the count left out.
pub fn value(v: &str) -> String {
    cut(&v.escape_default().to_string())
}

/// `s` cut to [`MAX_ECHO`] characters, saying how many were left out.
fn cut(s: &str) -> String {
    let n = s.chars().count();
    if n <= MAX_ECHO {
        return s.to_string();
    }
    let head: String = s.chars().take(MAX_ECHO).collect();
    format!("{head}…({} more characters)", n - MAX_ECHO)
}

/// A whole message made safe to print on one terminal line: control
/// characters but the line breaks escaped, and every word (a run without
/// spaces: an echoed value) longer than [`MAX_ECHO`] cut. The message's own
/// text (its units, µs, ×) stays as written.
pub fn message(m: &str) -> String {
    m.split('\n')
        .map(|line| {
            line.split(' ')
                .map(|w| {
                    let w: String = w
                        .chars()
                        .flat_map(|c| {
                            if c.is_control() && c != '\t' {
                                c.escape_default().collect::<Vec<_>>()
                            } else {
                                vec![c]
                            }
                        })
                        .collect();
                    cut(&w)
                })
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_escaped_and_cut() {
        assert_eq!(value("8K"), "8K");
        assert_eq!(value("1µs"), "1\\u{b5}s");
        assert_eq!(value("a\u{1b}[2J"), "a\\u{1b}[2J");
        let long = value(&"9".repeat(200_000));
        assert!(long.starts_with(&"9".repeat(80)), "{long}");
        assert!(long.ends_with("…(199920 more characters)"), "{long}");
    }

    #[test]
    fn messages_keep_their_own_text() {
        let m = format!("--sizes: bad size `{}`: use 1µs", "7".repeat(500));
        let s = message(&m);
        assert!(s.len() < 200, "{s}");
        assert!(s.ends_with("use 1µs"), "{s}");
        assert_eq!(message("a\u{7}b\nc"), "a\\u{7}b\nc");
    }
}
