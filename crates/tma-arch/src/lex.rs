//! A Rust source file as tokens: comments and literals removed, `#[cfg(test)]` / `#[test]`
//! items cut out. Enough of Rust's lexical grammar to find paths, items and function bodies;
//! not a parser.

/// One token: an identifier or keyword, `::`, or a single punctuation character.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    /// The token's text (`"crate"`, `"::"`, `"{"`); literals never appear.
    pub text: String,
    /// 1-based line of the token's first character.
    pub line: usize,
}

impl Token {
    /// Whether the token is an identifier or keyword (starts with a letter or `_`).
    pub fn is_ident(&self) -> bool {
        self.text
            .chars()
            .next()
            .is_some_and(|c| c.is_alphabetic() || c == '_')
    }
}

fn is_ident_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The tokens of `src`: comments, string / char / byte literals and numbers are dropped,
/// lifetimes kept as `'` + name, raw identifiers `r#x` as `x`.
pub fn tokenize(src: &str) -> Vec<Token> {
    let s: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let (mut i, mut line) = (0, 1);
    let count_lines = |from: usize, to: usize| s[from..to].iter().filter(|&&c| c == '\n').count();
    while i < s.len() {
        let c = s[i];
        let start = i;
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c.is_whitespace() {
            i += 1;
        } else if c == '/' && s.get(i + 1) == Some(&'/') {
            while i < s.len() && s[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && s.get(i + 1) == Some(&'*') {
            let mut depth = 0;
            while i < s.len() {
                if s[i] == '/' && s.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if s[i] == '*' && s.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            line += count_lines(start, i);
        } else if let Some(end) = string_literal_end(&s, i) {
            i = end;
            line += count_lines(start, i);
        } else if c == '\'' {
            i = char_or_lifetime_end(&s, i, &mut out, line);
        } else if c.is_ascii_digit() {
            while i < s.len() && is_ident_char(s[i]) {
                i += 1;
            }
        } else if c == 'b' && s.get(i + 1) == Some(&'\'') {
            // a byte literal `b'x'`: the quote is read next
            i += 1;
        } else if is_ident_char(c) {
            // a raw identifier `r#name` is the identifier `name`
            if c == 'r'
                && s.get(i + 1) == Some(&'#')
                && s.get(i + 2).is_some_and(|&c| is_ident_char(c))
            {
                i += 2;
            }
            let from = i;
            while i < s.len() && is_ident_char(s[i]) {
                i += 1;
            }
            out.push(Token {
                text: s[from..i].iter().collect(),
                line,
            });
        } else if c == ':' && s.get(i + 1) == Some(&':') {
            out.push(Token {
                text: "::".into(),
                line,
            });
            i += 2;
        } else {
            out.push(Token {
                text: c.to_string(),
                line,
            });
            i += 1;
        }
    }
    out
}

/// The end (exclusive) of a string literal starting at `i` (`"…"`, `b"…"`, `c"…"`, `r#"…"#`,
/// `br"…"`, `cr"…"`), or `None` when no string literal starts there.
fn string_literal_end(s: &[char], i: usize) -> Option<usize> {
    if i > 0 && is_ident_char(s[i - 1]) {
        return None;
    }
    let mut j = i;
    if matches!(s[j], 'b' | 'c') {
        j += 1;
    }
    let raw = s.get(j) == Some(&'r');
    if raw {
        j += 1;
    }
    let mut hashes = 0;
    while raw && s.get(j) == Some(&'#') {
        hashes += 1;
        j += 1;
    }
    if s.get(j) != Some(&'"') {
        return None;
    }
    j += 1;
    while j < s.len() {
        if !raw && s[j] == '\\' {
            j += 2;
            continue;
        }
        if s[j] == '"' && (0..hashes).all(|h| s.get(j + 1 + h) == Some(&'#')) {
            return Some(j + 1 + hashes);
        }
        j += 1;
    }
    Some(s.len())
}

/// Skips a char literal (`'a'`, `'\n'`, `'\u{1F600}'`) or pushes a lifetime (`'a`) token;
/// returns the index after it.
fn char_or_lifetime_end(s: &[char], i: usize, out: &mut Vec<Token>, line: usize) -> usize {
    if s.get(i + 1) == Some(&'\\') {
        let mut j = i + 3;
        while j < s.len() && s[j] != '\'' {
            j += 1;
        }
        return j + 1;
    }
    if s.get(i + 2) == Some(&'\'') {
        return i + 3;
    }
    let mut j = i + 1;
    while j < s.len() && is_ident_char(s[j]) {
        j += 1;
    }
    out.push(Token {
        text: s[i..j].iter().collect(),
        line,
    });
    j
}

/// The index after the item starting at `i` (its attributes already skipped): the first `;`
/// outside brackets, or the `}` closing its first top-level block.
pub fn item_end(t: &[Token], mut i: usize) -> usize {
    let mut depth = 0i32;
    while i < t.len() {
        match t[i].text.as_str() {
            "(" | "[" => depth += 1,
            ")" | "]" => depth -= 1,
            "{" => depth += 1,
            "}" => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            ";" if depth == 0 => return i + 1,
            _ => {}
        }
        i += 1;
    }
    t.len()
}

/// The index after the attribute `#[…]` / `#![…]` starting at `i`, or `None` when none does.
pub fn attribute_end(t: &[Token], i: usize) -> Option<usize> {
    if t.get(i)?.text != "#" {
        return None;
    }
    let mut j = i + 1;
    if t.get(j)?.text == "!" {
        j += 1;
    }
    if t.get(j)?.text != "[" {
        return None;
    }
    let mut depth = 0;
    while j < t.len() {
        match t[j].text.as_str() {
            "[" => depth += 1,
            "]" => {
                depth -= 1;
                if depth == 0 {
                    return Some(j + 1);
                }
            }
            _ => {}
        }
        j += 1;
    }
    Some(t.len())
}

/// Whether the attribute tokens `t[from..to]` mark test-only code: `#[test]`, `#[cfg(test)]`
/// or `#[cfg(all(test, …))]`.
pub fn is_test_attribute(t: &[Token], from: usize, to: usize) -> bool {
    let words: Vec<&str> = t[from..to]
        .iter()
        .map(|x| x.text.as_str())
        .filter(|w| !matches!(*w, "#" | "[" | "]" | "(" | ")"))
        .collect();
    matches!(
        words.as_slice(),
        ["test"] | ["cfg", "test"] | ["cfg", "all", "test", ..]
    )
}

/// `tokens` without test-only items (an item under `#[cfg(test)]` or `#[test]`, attributes
/// included).
pub fn strip_test_items(tokens: Vec<Token>) -> Vec<Token> {
    let mut out = Vec::with_capacity(tokens.len());
    let mut i = 0;
    while i < tokens.len() {
        let Some(end) = attribute_end(&tokens, i) else {
            out.push(tokens[i].clone());
            i += 1;
            continue;
        };
        // a run of outer attributes, then the item they belong to
        let (first, mut j, mut test) = (i, i, false);
        while let Some(e) = attribute_end(&tokens, j) {
            test |= tokens[j + 1].text != "!" && is_test_attribute(&tokens, j, e);
            j = e;
        }
        if test {
            i = item_end(&tokens, j);
        } else {
            out.extend_from_slice(&tokens[first..end]);
            i = end;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(src: &str) -> Vec<String> {
        tokenize(src).into_iter().map(|t| t.text).collect()
    }

    #[test]
    fn comments_and_literals_are_dropped_and_lines_counted() {
        let src = "a::b // crate::x\n/* crate::y\n */ \"crate::z\" r#\"q\"# 'c' '\\'' 'a b\nc";
        assert_eq!(texts(src), ["a", "::", "b", "'a", "b", "c"]);
        let lines: Vec<usize> = tokenize(src).iter().map(|t| t.line).collect();
        assert_eq!(lines, [1, 1, 1, 3, 3, 4]);
        assert_eq!(texts("br\"x\" c\"y\" b'z' r#match"), ["match"]);
    }

    #[test]
    fn test_items_are_cut_out() {
        let src = "use a;\n#[cfg(test)]\n#[allow(x)]\nmod tests { use crate::b; }\n#[test]\nfn t() {}\nconst C: [u8; 2] = [1, 2];\n#[cfg(test)] use crate::c;\nfn f() {}";
        let kept: Vec<String> = strip_test_items(tokenize(src))
            .into_iter()
            .map(|t| t.text)
            .collect();
        assert_eq!(
            kept.join(" "),
            "use a ; const C : [ u8 ; ] = [ , ] ; fn f ( ) { }"
        );
    }
}
