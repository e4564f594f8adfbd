//! Function lengths: every `fn` with a body, counted from the line of its `fn` keyword to the
//! line of its closing brace, and the reason written for a long one: a comment `// long: …` on
//! the line just above that `fn` line.

use crate::lex::Token;

/// One function with a body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Function {
    /// Its name.
    pub name: String,
    /// 1-based line of its `fn` keyword.
    pub line: usize,
    /// Lines from the `fn` keyword to the closing brace, both included.
    pub lines: usize,
    /// The text after `// long:` on the line just above the `fn` line, when there is one.
    pub reason: Option<String>,
}

/// The functions with a body among `tokens` (a file's tokens, test items already removed), with
/// `src` the file's text (for the `// long:` comments).
pub fn functions(tokens: &[Token], src: &str) -> Vec<Function> {
    let lines: Vec<&str> = src.lines().collect();
    let mut out = Vec::new();
    for i in 0..tokens.len().saturating_sub(1) {
        if tokens[i].text != "fn" || !tokens[i + 1].is_ident() {
            continue;
        }
        let Some(open) = body_start(tokens, i + 2) else {
            continue;
        };
        let mut depth = 0;
        let mut close = open;
        for (j, t) in tokens.iter().enumerate().skip(open) {
            match t.text.as_str() {
                "{" => depth += 1,
                "}" => {
                    depth -= 1;
                    if depth == 0 {
                        close = j;
                        break;
                    }
                }
                _ => {}
            }
        }
        let line = tokens[i].line;
        let reason = line
            .checked_sub(2)
            .and_then(|above| lines.get(above))
            .and_then(|l| l.trim().strip_prefix("// long:"))
            .map(|r| r.trim().to_string())
            .filter(|r| !r.is_empty());
        out.push(Function {
            name: tokens[i + 1].text.clone(),
            line,
            lines: tokens[close].line - line + 1,
            reason,
        });
    }
    out
}

/// The index of the `{` opening the body of a function whose signature starts at `from`, or
/// `None` for a declaration without body (`;` first).
fn body_start(t: &[Token], from: usize) -> Option<usize> {
    let mut depth = 0i32;
    for (j, x) in t.iter().enumerate().skip(from) {
        match x.text.as_str() {
            "(" | "[" => depth += 1,
            ")" | "]" => depth -= 1,
            "{" if depth == 0 => return Some(j),
            ";" if depth == 0 => return None,
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lex::tokenize;

    #[test]
    fn lengths_and_reasons_are_read() {
        let src = "trait T { fn d(&self); }\n\
                   // long: one table\n\
                   fn a(x: [u8; 2]) -> u8\n\
                   where u8: Copy {\n\
                       let f = |y: u8| { y };\n\
                       f(x[0])\n\
                   }\n\
                   /// docs\n\
                   pub fn b() { fn inner() {} }\n\
                   //long:\n\
                   fn c() {}";
        let fs = functions(&tokenize(src), src);
        let got: Vec<(&str, usize, usize, Option<&str>)> = fs
            .iter()
            .map(|f| (f.name.as_str(), f.line, f.lines, f.reason.as_deref()))
            .collect();
        assert_eq!(
            got,
            [
                ("a", 3, 5, Some("one table")),
                ("b", 9, 1, None),
                ("inner", 9, 1, None),
                ("c", 11, 1, None),
            ]
        );
    }
}
