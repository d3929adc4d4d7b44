//! `JSON.parse` as Claude Code runs it on a settings file, over the file's text as JavaScript
//! holds it (UTF-16 code units).
//!
//! `serde_json` differs from `JSON.parse` exactly where an agent can aim: a lone surrogate
//! escape (`"\ud800"`) is an error for `serde_json` and a string for JavaScript, and a repeated
//! key keeps its first position with its last value in a JavaScript object. This parser takes
//! RFC 8259 JSON as `JSON.parse` does (whitespace is space, tab, LF and CR; no comment, no
//! trailing comma) and keeps strings as code units, so nothing is lost or invented.

/// A JSON value as `JSON.parse` returns it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Js {
    Null,
    Bool(bool),
    /// The number, and its text as written (for messages).
    Num(f64, String),
    /// UTF-16 code units; may hold lone surrogates.
    Str(Vec<u16>),
    Arr(Vec<Js>),
    /// Keys in first-seen order, each with the last value given for it.
    Obj(Vec<(Vec<u16>, Js)>),
}

impl Js {
    /// The value of `key` in an object.
    pub(crate) fn get(&self, key: &str) -> Option<&Js> {
        let Js::Obj(entries) = self else {
            return None;
        };
        let key: Vec<u16> = key.encode_utf16().collect();
        entries.iter().find(|(k, _)| *k == key).map(|(_, v)| v)
    }

    /// JavaScript's `typeof`-like name, for messages.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Js::Null => "null",
            Js::Bool(_) => "a boolean",
            Js::Num(..) => "a number",
            Js::Str(_) => "a string",
            Js::Arr(_) => "an array",
            Js::Obj(_) => "an object",
        }
    }
}

/// Nesting deeper than this is not followed (JavaScript engines allow more; a file nested this
/// deep is not one clawmd decides on).
pub(crate) const MAX_DEPTH: usize = 512;

/// Why a text is not what `JSON.parse` accepts, or not what clawmd follows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ParseError {
    /// `JSON.parse` throws on it.
    Invalid,
    /// Nested deeper than [`MAX_DEPTH`]: clawmd does not decide.
    TooDeep,
}

/// `JSON.parse(text)`.
pub(crate) fn parse(text: &[u16]) -> Result<Js, ParseError> {
    let mut p = Parser { s: text, i: 0 };
    p.ws();
    let value = p.value(0)?;
    p.ws();
    if p.i != p.s.len() {
        return Err(ParseError::Invalid);
    }
    Ok(value)
}

struct Parser<'a> {
    s: &'a [u16],
    i: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u16> {
        self.s.get(self.i).copied()
    }

    fn ws(&mut self) {
        while matches!(self.peek(), Some(0x20 | 0x09 | 0x0a | 0x0d)) {
            self.i += 1;
        }
    }

    fn eat(&mut self, unit: u8) -> Result<(), ParseError> {
        if self.peek() == Some(u16::from(unit)) {
            self.i += 1;
            Ok(())
        } else {
            Err(ParseError::Invalid)
        }
    }

    fn literal(&mut self, word: &str, value: Js) -> Result<Js, ParseError> {
        for b in word.bytes() {
            self.eat(b)?;
        }
        Ok(value)
    }

    fn value(&mut self, depth: usize) -> Result<Js, ParseError> {
        if depth >= MAX_DEPTH {
            return Err(ParseError::TooDeep);
        }
        match self.peek().ok_or(ParseError::Invalid)? {
            0x7b => self.object(depth),
            0x5b => self.array(depth),
            0x22 => self.string().map(Js::Str),
            0x74 => self.literal("true", Js::Bool(true)),
            0x66 => self.literal("false", Js::Bool(false)),
            0x6e => self.literal("null", Js::Null),
            u if u == 0x2d || (0x30..=0x39).contains(&u) => self.number(),
            _ => Err(ParseError::Invalid),
        }
    }

    fn object(&mut self, depth: usize) -> Result<Js, ParseError> {
        self.eat(b'{')?;
        let mut entries: Vec<(Vec<u16>, Js)> = Vec::new();
        self.ws();
        if self.peek() == Some(0x7d) {
            self.i += 1;
            return Ok(Js::Obj(entries));
        }
        loop {
            self.ws();
            let key = self.string()?;
            self.ws();
            self.eat(b':')?;
            self.ws();
            let value = self.value(depth + 1)?;
            match entries.iter_mut().find(|(k, _)| *k == key) {
                Some(entry) => entry.1 = value,
                None => entries.push((key, value)),
            }
            self.ws();
            match self.peek() {
                Some(0x2c) => self.i += 1,
                Some(0x7d) => {
                    self.i += 1;
                    return Ok(Js::Obj(entries));
                }
                _ => return Err(ParseError::Invalid),
            }
        }
    }

    fn array(&mut self, depth: usize) -> Result<Js, ParseError> {
        self.eat(b'[')?;
        let mut items = Vec::new();
        self.ws();
        if self.peek() == Some(0x5d) {
            self.i += 1;
            return Ok(Js::Arr(items));
        }
        loop {
            self.ws();
            items.push(self.value(depth + 1)?);
            self.ws();
            match self.peek() {
                Some(0x2c) => self.i += 1,
                Some(0x5d) => {
                    self.i += 1;
                    return Ok(Js::Arr(items));
                }
                _ => return Err(ParseError::Invalid),
            }
        }
    }

    fn string(&mut self) -> Result<Vec<u16>, ParseError> {
        self.eat(b'"')?;
        let mut out = Vec::new();
        loop {
            let unit = self.peek().ok_or(ParseError::Invalid)?;
            self.i += 1;
            match unit {
                0x22 => return Ok(out),
                0x5c => {
                    let escaped = self.peek().ok_or(ParseError::Invalid)?;
                    self.i += 1;
                    let unit = match escaped {
                        0x22 => 0x22,
                        0x5c => 0x5c,
                        0x2f => 0x2f,
                        0x62 => 0x08,
                        0x66 => 0x0c,
                        0x6e => 0x0a,
                        0x72 => 0x0d,
                        0x74 => 0x09,
                        0x75 => {
                            let mut code = 0u16;
                            for _ in 0..4 {
                                let digit = self.peek().ok_or(ParseError::Invalid)?;
                                let value = char::from_u32(u32::from(digit))
                                    .and_then(|c| c.to_digit(16))
                                    .ok_or(ParseError::Invalid)?;
                                code = code * 16 + value as u16;
                                self.i += 1;
                            }
                            code
                        }
                        _ => return Err(ParseError::Invalid),
                    };
                    out.push(unit);
                }
                u if u < 0x20 => return Err(ParseError::Invalid),
                u => out.push(u),
            }
        }
    }

    fn number(&mut self) -> Result<Js, ParseError> {
        let start = self.i;
        let digit = |u: Option<u16>| u.is_some_and(|u| (0x30..=0x39).contains(&u));
        if self.peek() == Some(0x2d) {
            self.i += 1;
        }
        match self.peek() {
            Some(0x30) => self.i += 1,
            u if digit(u) => {
                while digit(self.peek()) {
                    self.i += 1;
                }
            }
            _ => return Err(ParseError::Invalid),
        }
        if self.peek() == Some(0x2e) {
            self.i += 1;
            if !digit(self.peek()) {
                return Err(ParseError::Invalid);
            }
            while digit(self.peek()) {
                self.i += 1;
            }
        }
        if matches!(self.peek(), Some(0x65 | 0x45)) {
            self.i += 1;
            if matches!(self.peek(), Some(0x2b | 0x2d)) {
                self.i += 1;
            }
            if !digit(self.peek()) {
                return Err(ParseError::Invalid);
            }
            while digit(self.peek()) {
                self.i += 1;
            }
        }
        let text = String::from_utf16_lossy(&self.s[start..self.i]);
        // Rust's float parsing is correctly rounded, as JavaScript's is.
        let value: f64 = text.parse().map_err(|_| ParseError::Invalid)?;
        Ok(Js::Num(value, text))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(text: &str) -> Result<Js, ParseError> {
        parse(&text.encode_utf16().collect::<Vec<_>>())
    }

    fn s(text: &str) -> Js {
        Js::Str(text.encode_utf16().collect())
    }

    #[test]
    fn parses_what_json_parse_parses() {
        assert_eq!(
            p(" {\"a\" : [1, true, null, \"x\"]}\r\n")
                .unwrap()
                .get("a")
                .unwrap(),
            &Js::Arr(vec![
                Js::Num(1.0, "1".into()),
                Js::Bool(true),
                Js::Null,
                s("x")
            ])
        );
        assert_eq!(p("\"\\u00e9\\n\\/\"").unwrap(), s("é\n/"));
        assert_eq!(p("-0.5e+2").unwrap(), Js::Num(-50.0, "-0.5e+2".into()));
        assert_eq!(p("10e-1").unwrap(), Js::Num(1.0, "10e-1".into()));
        // A lone surrogate is a string to JavaScript.
        assert_eq!(p("\"\\ud800\"").unwrap(), Js::Str(vec![0xd800]));
        // A repeated key: its first place, its last value.
        let obj = p("{\"a\":1,\"b\":2,\"a\":3}").unwrap();
        let Js::Obj(entries) = &obj else { panic!() };
        assert_eq!(entries.len(), 2);
        assert_eq!(obj.get("a"), Some(&Js::Num(3.0, "3".into())));
    }

    #[test]
    fn refuses_what_json_parse_refuses() {
        for bad in [
            "",
            "{",
            "{\"a\":1,}",
            "[1,]",
            "// c\n{}",
            "{a:1}",
            "'a'",
            "01",
            "1.",
            ".5",
            "+1",
            "\"tab\there\"",
            "\"\\x41\"",
            "{}\u{0}",
            "nul",
            "\u{feff}{}",
            "{}\u{a0}",
            "\"\\u12\"",
        ] {
            assert_eq!(p(bad), Err(ParseError::Invalid), "{bad:?}");
        }
    }

    #[test]
    fn deep_nesting_is_not_decided() {
        let deep = format!("{}{}", "[".repeat(MAX_DEPTH + 1), "]".repeat(MAX_DEPTH + 1));
        assert_eq!(p(&deep), Err(ParseError::TooDeep));
        let ok = format!("{}{}", "[".repeat(100), "]".repeat(100));
        assert!(p(&ok).is_ok());
    }

    /// The same value as serde_json's, where serde_json can hold it.
    fn same(mine: &Js, theirs: &serde_json::Value) -> bool {
        match (mine, theirs) {
            (Js::Null, serde_json::Value::Null) => true,
            (Js::Bool(a), serde_json::Value::Bool(b)) => a == b,
            (Js::Num(a, _), serde_json::Value::Number(b)) => Some(*a) == b.as_f64(),
            (Js::Str(a), serde_json::Value::String(b)) => {
                *a == b.encode_utf16().collect::<Vec<_>>()
            }
            (Js::Arr(a), serde_json::Value::Array(b)) => {
                a.len() == b.len() && a.iter().zip(b).all(|(x, y)| same(x, y))
            }
            (Js::Obj(a), serde_json::Value::Object(b)) => {
                a.len() == b.len()
                    && a.iter().all(|(k, v)| {
                        b.get(&String::from_utf16_lossy(k))
                            .is_some_and(|w| same(v, w))
                    })
            }
            _ => false,
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

        /// On text made of JSON's own pieces, this parser and serde_json accept the same texts
        /// and read the same values (serde_json cannot hold lone surrogates, and keeps a
        /// repeated key's last value as JavaScript does).
        #[test]
        fn agrees_with_serde_json(
            pieces in proptest::collection::vec(
                proptest::sample::select(vec![
                    "{", "}", "[", "]", ":", ",", " ", "\n", "\t", "\r", "\"a\"", "\"claudeMdExcludes\"",
                    "\"env\"", "\"x\\ny\"", "\"\\u00e9\"", "\"\\\"\"", "1", "-0", "2.5e3", "01", "1.",
                    "true", "false", "null", "nul", "\"", "\\", "\u{feff}", "\u{a0}", "é",
                ]),
                0..24,
            )
        ) {
            let text = pieces.concat();
            let mine = parse(&text.encode_utf16().collect::<Vec<_>>());
            let theirs = serde_json::from_str::<serde_json::Value>(&text);
            match (&mine, &theirs) {
                (Ok(a), Ok(b)) => proptest::prop_assert!(same(a, b), "{text:?}: {a:?} vs {b}"),
                (Err(ParseError::Invalid), Err(_)) => {}
                _ => proptest::prop_assert!(false, "{text:?}: {mine:?} vs {theirs:?}"),
            }
        }
    }
}
