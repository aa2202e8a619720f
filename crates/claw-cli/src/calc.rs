//! A small arithmetic evaluator for the `calculator` tool: `+ - * / % ^`,
//! parentheses, unary minus, decimals and `pi` / `e`.

/// Why an expression could not be evaluated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CalcError(pub(crate) String);

impl std::fmt::Display for CalcError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

struct Parser<'a> {
    chars: std::iter::Peekable<std::str::CharIndices<'a>>,
    depth: usize,
}

const MAX_DEPTH: usize = 200;

/// Evaluates `expr`.
pub(crate) fn evaluate(expr: &str) -> Result<f64, CalcError> {
    let mut p = Parser { chars: expr.char_indices().peekable(), depth: 0 };
    let v = p.sum()?;
    p.skip_ws();
    if let Some((i, c)) = p.chars.peek() {
        return Err(CalcError(format!("unexpected '{c}' at position {i}")));
    }
    if v.is_finite() { Ok(v) } else { Err(CalcError("result is not a finite number".into())) }
}

impl Parser<'_> {
    fn skip_ws(&mut self) {
        while self.chars.peek().is_some_and(|(_, c)| c.is_whitespace()) {
            self.chars.next();
        }
    }

    fn eat(&mut self, want: char) -> bool {
        self.skip_ws();
        if self.chars.peek().is_some_and(|(_, c)| *c == want) {
            self.chars.next();
            true
        } else {
            false
        }
    }

    fn sum(&mut self) -> Result<f64, CalcError> {
        let mut v = self.product()?;
        loop {
            if self.eat('+') {
                v += self.product()?;
            } else if self.eat('-') {
                v -= self.product()?;
            } else {
                return Ok(v);
            }
        }
    }

    fn product(&mut self) -> Result<f64, CalcError> {
        let mut v = self.power()?;
        loop {
            if self.eat('*') {
                v *= self.power()?;
            } else if self.eat('/') {
                let d = self.power()?;
                if d == 0.0 {
                    return Err(CalcError("division by zero".into()));
                }
                v /= d;
            } else if self.eat('%') {
                let d = self.power()?;
                if d == 0.0 {
                    return Err(CalcError("division by zero".into()));
                }
                v %= d;
            } else {
                return Ok(v);
            }
        }
    }

    fn power(&mut self) -> Result<f64, CalcError> {
        let base = self.unary()?;
        if self.eat('^') {
            // Right-associative.
            let exp = self.power()?;
            return Ok(base.powf(exp));
        }
        Ok(base)
    }

    fn unary(&mut self) -> Result<f64, CalcError> {
        if self.eat('-') {
            return self.nested(|p| p.unary()).map(|v| -v);
        }
        if self.eat('+') {
            return self.nested(|p| p.unary());
        }
        self.atom()
    }

    fn nested(
        &mut self,
        f: impl FnOnce(&mut Self) -> Result<f64, CalcError>,
    ) -> Result<f64, CalcError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(CalcError("expression is nested too deeply".into()));
        }
        let r = f(self);
        self.depth -= 1;
        r
    }

    fn atom(&mut self) -> Result<f64, CalcError> {
        self.skip_ws();
        if self.eat('(') {
            let v = self.nested(|p| p.sum())?;
            if !self.eat(')') {
                return Err(CalcError("missing ')'".into()));
            }
            return Ok(v);
        }
        let mut text = String::new();
        while let Some((_, c)) = self.chars.peek() {
            if c.is_ascii_alphanumeric() || *c == '.' || *c == '_' {
                text.push(*c);
                self.chars.next();
            } else {
                break;
            }
        }
        match text.as_str() {
            "" => Err(match self.chars.peek() {
                Some((i, c)) => CalcError(format!("unexpected '{c}' at position {i}")),
                None => CalcError("unexpected end of expression".into()),
            }),
            "pi" => Ok(std::f64::consts::PI),
            "e" => Ok(std::f64::consts::E),
            t => t.parse::<f64>().map_err(|_| CalcError(format!("not a number: {t}"))),
        }
    }
}

/// Formats a result without a trailing `.0` for integers.
pub(crate) fn format_number(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 { format!("{}", v as i64) } else { format!("{v}") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic() {
        assert_eq!(evaluate("1 + 2 * 3"), Ok(7.0));
        assert_eq!(evaluate("(1 + 2) * 3"), Ok(9.0));
        assert_eq!(evaluate("2 ^ 3 ^ 2"), Ok(512.0));
        assert_eq!(evaluate("-2^2"), Ok(4.0));
        assert_eq!(evaluate("7 % 4 + 0.5"), Ok(3.5));
        assert_eq!(format_number(evaluate("37 * 1.2").unwrap_or(0.0)), "44.4");
        assert_eq!(format_number(evaluate("144 / 12").unwrap_or(0.0)), "12");
    }

    #[test]
    fn errors() {
        assert!(evaluate("1 / 0").is_err());
        assert!(evaluate("1 +").is_err());
        assert!(evaluate("(1").is_err());
        assert!(evaluate("abc").is_err());
        assert!(evaluate(&"(".repeat(10_000)).is_err());
        assert!(evaluate(&"-".repeat(10_000)).is_err());
    }
}
