//! A reader for Python `repr()` text, as far as vLLM log lines need it:
//! `SamplingParams(...)`, `kv_transfer_params` dicts, `KVTransferConfig(...)`.

use std::borrow::Cow;

/// Deepest nesting of Python literals we follow before giving up, so a
/// hostile `[[[[...` line cannot exhaust the stack.
const MAX_DEPTH: usize = 32;

/// A Python literal, as far as `repr()` output needs: enough to read
/// `kv_transfer_params` and `KVTransferConfig` values.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Py<'a> {
    None,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(Cow<'a, str>),
    List(Vec<Py<'a>>),
    Dict(Vec<(Py<'a>, Py<'a>)>),
    /// Anything else (`<Enum.X: 0>`, `Foo(a=1)`, ...), kept as its raw text.
    Other(&'a str),
}

impl Py<'_> {
    pub(crate) fn get(&self, key: &str) -> Option<&Self> {
        match self {
            Py::Dict(items) => {
                items.iter().find(|(k, _)| matches!(k, Py::Str(s) if s == key)).map(|(_, v)| v)
            }
            _ => None,
        }
    }

    /// Number of non-list values inside nested lists: `[[1, 2], [3]]` → 3.
    pub(crate) fn count_leaves(&self) -> usize {
        match self {
            Py::List(items) => items.iter().map(Py::count_leaves).sum(),
            _ => 1,
        }
    }
}

/// A byte cursor over Python `repr()` text. Every method stops (returns
/// `None`/`false`) on input it does not understand instead of panicking.
pub(crate) struct Cursor<'a> {
    s: &'a str,
    i: usize,
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(s: &'a str) -> Self {
        Cursor { s, i: 0 }
    }

    pub(crate) fn rest(&self) -> &'a str {
        self.s.get(self.i..).unwrap_or("")
    }

    pub(crate) fn peek(&self) -> Option<u8> {
        self.s.as_bytes().get(self.i).copied()
    }

    pub(crate) fn ws(&mut self) {
        while self.peek() == Some(b' ') {
            self.i += 1;
        }
    }

    /// Consumes `b` (after spaces) if it is next.
    pub(crate) fn eat(&mut self, b: u8) -> bool {
        self.ws();
        if self.peek() == Some(b) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    /// `name=` of a keyword-argument repr; `None` at `)` or end.
    pub(crate) fn key_eq(&mut self) -> Option<&'a str> {
        self.ws();
        let start = self.i;
        while self.peek().is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_') {
            self.i += 1;
        }
        let key = &self.s[start..self.i];
        if key.is_empty() || self.peek() != Some(b'=') {
            return None;
        }
        self.i += 1;
        Some(key)
    }

    /// Skips a quoted string starting at the cursor; returns its raw inside.
    pub(crate) fn string(&mut self) -> Option<&'a str> {
        let q = self.peek()?;
        let b = self.s.as_bytes();
        let start = self.i + 1;
        let mut j = start;
        while j < b.len() {
            match b[j] {
                b'\\' => j += 2,
                c if c == q => {
                    self.i = j + 1;
                    return self.s.get(start..j);
                }
                _ => j += 1,
            }
        }
        None
    }

    /// Skips one value of any shape without building it: iterative, so deep
    /// nesting costs no stack. Stops before a `,` `)` `]` `}` at depth 0.
    pub(crate) fn skip_value(&mut self) -> bool {
        self.ws();
        let b = self.s.as_bytes();
        let mut depth = 0usize;
        while self.i < b.len() {
            match b[self.i] {
                b'\'' | b'"' => {
                    if self.string().is_none() {
                        return false;
                    }
                    continue;
                }
                b'(' | b'[' | b'{' | b'<' => depth += 1,
                b')' | b']' | b'}' | b'>' if depth > 0 => depth -= 1,
                b',' | b')' | b']' | b'}' if depth == 0 => return true,
                _ => {}
            }
            self.i += 1;
        }
        depth == 0
    }

    /// Parses one value. `depth` bounds recursion into lists and dicts.
    pub(crate) fn value(&mut self, depth: usize) -> Option<Py<'a>> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.ws();
        match self.peek()? {
            b'\'' | b'"' => {
                let raw = self.string()?;
                Some(Py::Str(unescape(raw)))
            }
            open @ (b'[' | b'(') => {
                let close = if open == b'[' { b']' } else { b')' };
                self.i += 1;
                let mut items = Vec::new();
                loop {
                    if self.eat(close) {
                        return Some(Py::List(items));
                    }
                    items.push(self.value(depth + 1)?);
                    if !self.eat(b',') {
                        return self.eat(close).then_some(Py::List(items));
                    }
                }
            }
            b'{' => {
                self.i += 1;
                let mut items = Vec::new();
                loop {
                    if self.eat(b'}') {
                        return Some(Py::Dict(items));
                    }
                    let k = self.value(depth + 1)?;
                    if !self.eat(b':') {
                        return None;
                    }
                    let v = self.value(depth + 1)?;
                    items.push((k, v));
                    if !self.eat(b',') {
                        return self.eat(b'}').then_some(Py::Dict(items));
                    }
                }
            }
            _ => {
                let start = self.i;
                while self
                    .peek()
                    .is_some_and(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-' | b'+'))
                {
                    self.i += 1;
                }
                let tok = &self.s[start..self.i];
                if tok.is_empty() || matches!(self.peek(), Some(b'(' | b'[')) {
                    // A call repr, `<Enum.X: 0>` or similar: keep its text.
                    self.i = start;
                    if !self.skip_value() {
                        return None;
                    }
                    return Some(Py::Other(&self.s[start..self.i]));
                }
                Some(match tok {
                    "None" => Py::None,
                    "True" => Py::Bool(true),
                    "False" => Py::Bool(false),
                    _ => match tok.parse::<i64>() {
                        Ok(n) => Py::Int(n),
                        Err(_) => tok.parse::<f64>().map(Py::Float).unwrap_or(Py::Other(tok)),
                    },
                })
            }
        }
    }
}

/// Undoes the common `repr()` escapes; others are kept as written.
pub(crate) fn unescape(raw: &str) -> Cow<'_, str> {
    if !raw.contains('\\') {
        return Cow::Borrowed(raw);
    }
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some(e @ ('\\' | '\'' | '"')) => out.push(e),
            Some(e) => {
                out.push('\\');
                out.push(e);
            }
            None => out.push('\\'),
        }
    }
    Cow::Owned(out)
}
