//! A small arithmetic evaluator for the `calculator` tool: `+ - * / % ^`,
//! parentheses, unary minus, decimals (`1.5`, `2e-3`) and `pi` / `e`.
//!
//! Arithmetic is exact (rationals over big integers) wherever the answer is
//! exact, so `0.1 + 0.2` is `0.3` and a large product keeps every digit.
//! `pi`, `e` and non-integer powers are floating point, and the result then
//! says it is approximate. Unary minus binds looser than `^` (`-2^2` is -4),
//! `^` is right-associative, and nesting (parentheses, signs, powers) is
//! bounded so no input can exhaust the stack.

use num_bigint::BigInt;
use num_integer::Integer;
use num_rational::BigRational;
use num_traits::{One, Signed, ToPrimitive, Zero};

/// Why an expression could not be evaluated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CalcError(pub(crate) String);

impl std::fmt::Display for CalcError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

fn err<T>(message: impl Into<String>) -> Result<T, CalcError> {
    Err(CalcError(message.into()))
}

/// A value: exact, or a floating-point approximation.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Number {
    /// An exact rational.
    Exact(BigRational),
    /// A floating-point approximation (finite).
    Approx(f64),
}

/// The most nested parentheses, signs and powers.
const MAX_DEPTH: usize = 200;

/// The largest exact numerator or denominator kept, in bits (about 30,000
/// decimal digits); beyond it a power is computed approximately.
const MAX_BITS: u64 = 100_000;

/// The most digits of an exact integer shown whole.
const MAX_SHOWN_DIGITS: usize = 1000;

/// The largest decimal exponent accepted in a literal (`1e300`).
const MAX_EXPONENT: u32 = 1000;

impl Number {
    fn to_f64(&self) -> f64 {
        match self {
            Number::Exact(r) => r.to_f64().unwrap_or(f64::NAN),
            Number::Approx(v) => *v,
        }
    }

    fn is_zero(&self) -> bool {
        match self {
            Number::Exact(r) => r.is_zero(),
            Number::Approx(v) => *v == 0.0,
        }
    }

    fn neg(self) -> Number {
        match self {
            Number::Exact(r) => Number::Exact(-r),
            Number::Approx(v) => Number::Approx(-v),
        }
    }
}

fn approx(v: f64) -> Result<Number, CalcError> {
    if v.is_nan() {
        return err("the result is not a real number");
    }
    if !v.is_finite() {
        return err("the result is too large");
    }
    Ok(Number::Approx(v))
}

#[derive(Clone, Copy)]
enum Op {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
}

fn apply(op: Op, a: Number, b: Number) -> Result<Number, CalcError> {
    if matches!(op, Op::Div | Op::Rem) && b.is_zero() {
        return err("division by zero");
    }
    match (a, b) {
        (Number::Exact(x), Number::Exact(y)) => Ok(Number::Exact(match op {
            Op::Add => x + y,
            Op::Sub => x - y,
            Op::Mul => x * y,
            Op::Div => x / y,
            // The remainder of truncated division, with the dividend's sign (as `%` in C and Rust).
            Op::Rem => {
                let q = (&x / &y).trunc();
                x - y * q
            }
        })),
        (a, b) => {
            let (x, y) = (a.to_f64(), b.to_f64());
            approx(match op {
                Op::Add => x + y,
                Op::Sub => x - y,
                Op::Mul => x * y,
                Op::Div => x / y,
                Op::Rem => x % y,
            })
        }
    }
}

fn bits(r: &BigRational) -> u64 {
    r.numer().bits().max(r.denom().bits())
}

fn power(base: Number, exp: Number) -> Result<Number, CalcError> {
    if let (Number::Exact(b), Number::Exact(e)) = (&base, &exp)
        && e.is_integer()
    {
        let n = e.to_integer();
        if b.is_zero() && n.is_negative() {
            return err("division by zero");
        }
        // Exact when the result stays within MAX_BITS (checked before computing it).
        if let Some(n) = n.to_i32()
            && (b.is_zero()
                || b.abs().is_one()
                || bits(b).saturating_mul(u64::from(n.unsigned_abs())) <= MAX_BITS)
        {
            return Ok(Number::Exact(num_traits::Pow::pow(b, n)));
        }
    }
    approx(base.to_f64().powf(exp.to_f64()))
}

/// Evaluates `expr`.
pub(crate) fn evaluate(expr: &str) -> Result<Number, CalcError> {
    let mut p = Parser { chars: expr.char_indices().peekable(), depth: 0 };
    let v = p.sum()?;
    p.skip_ws();
    if let Some((i, c)) = p.chars.peek() {
        return err(format!("unexpected '{c}' at position {i}"));
    }
    Ok(v)
}

struct Parser<'a> {
    chars: std::iter::Peekable<std::str::CharIndices<'a>>,
    depth: usize,
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

    fn nested(
        &mut self,
        f: impl FnOnce(&mut Self) -> Result<Number, CalcError>,
    ) -> Result<Number, CalcError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return err(format!(
                "the expression is nested too deeply (at most {MAX_DEPTH} levels)"
            ));
        }
        let r = f(self);
        self.depth -= 1;
        r
    }

    fn sum(&mut self) -> Result<Number, CalcError> {
        let mut v = self.product()?;
        loop {
            let op = if self.eat('+') {
                Op::Add
            } else if self.eat('-') {
                Op::Sub
            } else {
                return Ok(v);
            };
            v = apply(op, v, self.product()?)?;
        }
    }

    fn product(&mut self) -> Result<Number, CalcError> {
        let mut v = self.unary()?;
        loop {
            let op = if self.eat('*') {
                Op::Mul
            } else if self.eat('/') {
                Op::Div
            } else if self.eat('%') {
                Op::Rem
            } else {
                return Ok(v);
            };
            v = apply(op, v, self.unary()?)?;
        }
    }

    /// Signs bind looser than `^`: `-2^2` is `-(2^2)`.
    fn unary(&mut self) -> Result<Number, CalcError> {
        if self.eat('-') {
            return self.nested(|p| p.unary()).map(Number::neg);
        }
        if self.eat('+') {
            return self.nested(|p| p.unary());
        }
        self.power()
    }

    fn power(&mut self) -> Result<Number, CalcError> {
        let base = self.atom()?;
        if self.eat('^') {
            // Right-associative; the exponent may carry a sign (`2^-1`).
            let exp = self.nested(|p| p.unary())?;
            return power(base, exp);
        }
        Ok(base)
    }

    fn atom(&mut self) -> Result<Number, CalcError> {
        self.skip_ws();
        if self.eat('(') {
            let v = self.nested(|p| p.sum())?;
            if !self.eat(')') {
                return err("missing ')'");
            }
            return Ok(v);
        }
        let mut text = String::new();
        while let Some(&(_, c)) = self.chars.peek() {
            let exponent_sign = (c == '-' || c == '+')
                && (text.ends_with('e') || text.ends_with('E'))
                && text.starts_with(|d: char| d.is_ascii_digit() || d == '.');
            if c.is_ascii_alphanumeric() || c == '.' || c == '_' || exponent_sign {
                text.push(c);
                self.chars.next();
            } else {
                break;
            }
        }
        match text.as_str() {
            "" => match self.chars.peek() {
                Some((i, c)) => err(format!("unexpected '{c}' at position {i}")),
                None => err("unexpected end of expression"),
            },
            "pi" => Ok(Number::Approx(std::f64::consts::PI)),
            "e" => Ok(Number::Approx(std::f64::consts::E)),
            t => literal(t).map(Number::Exact),
        }
    }
}

/// A decimal literal (`12`, `0.1`, `.5`, `2.5e-3`) as an exact rational.
fn literal(text: &str) -> Result<BigRational, CalcError> {
    let bad = || CalcError(format!("not a number: {text}"));
    let (mantissa, exponent) = match text.find(['e', 'E']) {
        Some(i) => (text.get(..i).unwrap_or(""), Some(text.get(i + 1..).unwrap_or(""))),
        None => (text, None),
    };
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits_ok = |s: &str| s.chars().all(|c| c.is_ascii_digit());
    if (whole.is_empty() && fraction.is_empty()) || !digits_ok(whole) || !digits_ok(fraction) {
        return Err(bad());
    }
    let digits: BigInt = format!("{whole}{fraction}").parse().map_err(|_| bad())?;
    let places = u32::try_from(fraction.len()).map_err(|_| bad())?;
    let mut value = BigRational::new(digits, pow10(places));
    if let Some(exponent) = exponent {
        let (negative, magnitude) = match exponent.strip_prefix('-') {
            Some(m) => (true, m),
            None => (false, exponent.strip_prefix('+').unwrap_or(exponent)),
        };
        if magnitude.is_empty() || !digits_ok(magnitude) {
            return Err(bad());
        }
        let n: u32 = magnitude.parse().ok().filter(|n| *n <= MAX_EXPONENT).ok_or_else(|| {
            CalcError(format!("the exponent of {text} is beyond ±{MAX_EXPONENT}"))
        })?;
        let scale = BigRational::from_integer(pow10(n));
        value = if negative { value / scale } else { value * scale };
    }
    Ok(value)
}

fn pow10(n: u32) -> BigInt {
    num_traits::Pow::pow(BigInt::from(10u8), n)
}

/// The result as the tool shows it: exact digits when exact (a fraction that
/// has no finite decimal also gets its value to 16 digits), `≈` when not.
pub(crate) fn format(v: &Number) -> String {
    match v {
        Number::Approx(x) => format!("≈ {x} (approximate: floating point)"),
        Number::Exact(r) if r.is_integer() => {
            let digits = r.to_integer().to_string();
            let count = digits.trim_start_matches('-').len();
            if count <= MAX_SHOWN_DIGITS {
                digits
            } else {
                let f = r.to_f64().filter(|f| f.is_finite());
                match f {
                    Some(f) => format!("≈ {f:e} (an exact integer of {count} digits)"),
                    None => {
                        let (sign, rest) = digits.split_at(digits.len() - count);
                        let lead = rest.get(..1).unwrap_or("");
                        let tail = rest.get(1..17).unwrap_or("");
                        format!(
                            "≈ {sign}{lead}.{tail}e{} (an exact integer of {count} digits)",
                            count - 1
                        )
                    }
                }
            }
        }
        Number::Exact(r) => match terminating_decimal(r) {
            Some(text) => text,
            None => {
                let f = r.to_f64().unwrap_or(f64::NAN);
                if r.numer().bits() <= 128 && r.denom().bits() <= 128 {
                    format!("{}/{} ≈ {f}", r.numer(), r.denom())
                } else {
                    format!("≈ {f} (an exact fraction, shown rounded)")
                }
            }
        },
    }
}

/// `r` written out in decimal when its expansion ends (the denominator has
/// only the factors 2 and 5) within 60 places.
fn terminating_decimal(r: &BigRational) -> Option<String> {
    let mut d = r.denom().clone();
    let (two, five) = (BigInt::from(2u8), BigInt::from(5u8));
    let (mut twos, mut fives) = (0u32, 0u32);
    while d.is_even() {
        d /= &two;
        twos += 1;
    }
    while (&d % &five).is_zero() {
        d /= &five;
        fives += 1;
    }
    let places = twos.max(fives);
    if !d.is_one() || places > 60 {
        return None;
    }
    let scaled = (r * BigRational::from_integer(pow10(places))).to_integer();
    let negative = scaled.is_negative();
    let digits = scaled.abs().to_string();
    let places = places as usize;
    let padded = format!("{digits:0>width$}", width = places + 1);
    let (int, frac) = padded.split_at(padded.len() - places);
    Some(format!("{}{int}.{frac}", if negative { "-" } else { "" }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn show(expr: &str) -> String {
        match evaluate(expr) {
            Ok(v) => format(&v),
            Err(e) => format!("error: {e}"),
        }
    }

    #[test]
    fn arithmetic() {
        assert_eq!(show("1 + 2 * 3"), "7");
        assert_eq!(show("(1 + 2) * 3"), "9");
        assert_eq!(show("2 ^ 3 ^ 2"), "512");
        assert_eq!(show("-2^2"), "-4");
        assert_eq!(show("2^-1"), "0.5");
        assert_eq!(show("7 % 4 + 0.5"), "3.5");
        assert_eq!(show("-7 % 4"), "-3");
        assert_eq!(show("37 * 1.2"), "44.4");
        assert_eq!(show("144 / 12"), "12");
        assert_eq!(show("0.1 + 0.2"), "0.3");
        assert_eq!(show("1 / 3"), "1/3 ≈ 0.3333333333333333");
        assert_eq!(show("2.5e-3 * 4"), "0.01");
        assert_eq!(show("123456789 * 987654321 * 123456789"), "15053411111487447638891241");
        assert!(show("pi").starts_with("≈ 3.14159"), "{}", show("pi"));
        assert!(show("2 ^ 0.5").contains("approximate"));
    }

    #[test]
    fn errors() {
        assert!(evaluate("1 / 0").is_err());
        assert!(evaluate("0 ^ -1").is_err());
        assert!(evaluate("(-8) ^ 0.5").is_err());
        assert!(evaluate("1 +").is_err());
        assert!(evaluate("(1").is_err());
        assert!(evaluate("abc").is_err());
        assert!(evaluate("1e99999").is_err());
        assert!(evaluate(&"(".repeat(10_000)).is_err());
        assert!(evaluate(&"-".repeat(10_000)).is_err());
        assert!(evaluate(&"2^".repeat(100_000)).is_err());
    }
}
