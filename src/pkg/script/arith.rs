//! Arithmetic expansion `$((…))`: integers (64-bit, wrapping as sh's
//! `intmax_t` arithmetic does on FreeBSD), variables by name, assignment
//! operators; a division by zero or a variable that is not a number is
//! sh's error (status 2).

use brush_parser::ast::{
    ArithmeticExpr as A, ArithmeticTarget, BinaryOperator as B, UnaryAssignmentOperator as UA,
    UnaryOperator as U,
};

use super::shell::{Shell, Streams, R};

impl Shell<'_> {
    pub(crate) fn arith(&mut self, text: &str, s: &mut Streams) -> R<i64> {
        let expanded = self.expand_string(text, s)?;
        let expr = brush_parser::arithmetic::parse(&expanded).map_err(|_| {
            self.shell_error(format!(
                "arithmetic expression: syntax error: \"{expanded}\""
            ))
        })?;
        self.eval(&expr, 0)
    }

    fn var_number(&mut self, t: &ArithmeticTarget, depth: usize) -> R<i64> {
        let name = self.target(t)?;
        let v = self.get(&name).unwrap_or("").trim().to_string();
        if v.is_empty() {
            return Ok(0);
        }
        match parse_number(&v) {
            Some(n) => Ok(n),
            None => {
                // A variable holding an expression, as sh evaluates it.
                let expr = brush_parser::arithmetic::parse(&v).map_err(|_| {
                    self.shell_error(format!("arithmetic expression: expecting primary: \"{v}\""))
                })?;
                self.eval(&expr, depth + 1)
            }
        }
    }

    fn target(&self, t: &ArithmeticTarget) -> R<String> {
        match t {
            ArithmeticTarget::Variable(n) => Ok(n.clone()),
            ArithmeticTarget::ArrayElement(..) => Err(self.unsupported("arrays (bash)")),
        }
    }

    fn eval(&mut self, e: &A, depth: usize) -> R<i64> {
        if depth > 64 {
            return Err(self.limit("64 nested arithmetic expressions".into()));
        }
        let d = depth + 1;
        Ok(match e {
            A::Literal(n) => *n,
            A::Reference(t) => self.var_number(t, d)?,
            A::UnaryOp(op, x) => {
                let x = self.eval(x, d)?;
                match op {
                    U::UnaryPlus => x,
                    U::UnaryMinus => x.wrapping_neg(),
                    U::BitwiseNot => !x,
                    U::LogicalNot => i64::from(x == 0),
                }
            }
            A::BinaryOp(B::LogicalAnd, l, r) => {
                i64::from(self.eval(l, d)? != 0 && self.eval(r, d)? != 0)
            }
            A::BinaryOp(B::LogicalOr, l, r) => {
                i64::from(self.eval(l, d)? != 0 || self.eval(r, d)? != 0)
            }
            A::BinaryOp(op, l, r) => {
                let l = self.eval(l, d)?;
                let r = self.eval(r, d)?;
                self.binary(op, l, r)?
            }
            A::Conditional(c, a, b) => {
                if self.eval(c, d)? != 0 {
                    self.eval(a, d)?
                } else {
                    self.eval(b, d)?
                }
            }
            A::Assignment(t, x) => {
                let v = self.eval(x, d)?;
                let name = self.target(t)?;
                self.set(&name, v.to_string())?;
                v
            }
            A::BinaryAssignment(op, t, x) => {
                let cur = self.var_number(t, d)?;
                let x = self.eval(x, d)?;
                let v = self.binary(op, cur, x)?;
                let name = self.target(t)?;
                self.set(&name, v.to_string())?;
                v
            }
            A::UnaryAssignment(op, t) => {
                let cur = self.var_number(t, d)?;
                let new = match op {
                    UA::PrefixIncrement | UA::PostfixIncrement => cur.wrapping_add(1),
                    UA::PrefixDecrement | UA::PostfixDecrement => cur.wrapping_sub(1),
                };
                let name = self.target(t)?;
                self.set(&name, new.to_string())?;
                match op {
                    UA::PrefixIncrement | UA::PrefixDecrement => new,
                    _ => cur,
                }
            }
        })
    }

    fn binary(&self, op: &B, l: i64, r: i64) -> R<i64> {
        Ok(match op {
            B::Power => {
                if r < 0 {
                    return Err(self.shell_error("arithmetic expression: negative exponent".into()));
                }
                l.wrapping_pow(r.min(u32::MAX as i64) as u32)
            }
            B::Multiply => l.wrapping_mul(r),
            B::Divide | B::Modulo => {
                if r == 0 {
                    return Err(self.shell_error("arithmetic expression: division by zero".into()));
                }
                if matches!(op, B::Divide) {
                    l.wrapping_div(r)
                } else {
                    l.wrapping_rem(r)
                }
            }
            B::Comma => r,
            B::Add => l.wrapping_add(r),
            B::Subtract => l.wrapping_sub(r),
            B::ShiftLeft => l.wrapping_shl(r as u32),
            B::ShiftRight => l.wrapping_shr(r as u32),
            B::LessThan => i64::from(l < r),
            B::LessThanOrEqualTo => i64::from(l <= r),
            B::GreaterThan => i64::from(l > r),
            B::GreaterThanOrEqualTo => i64::from(l >= r),
            B::Equals => i64::from(l == r),
            B::NotEquals => i64::from(l != r),
            B::BitwiseAnd => l & r,
            B::BitwiseXor => l ^ r,
            B::BitwiseOr => l | r,
            B::LogicalAnd => i64::from(l != 0 && r != 0),
            B::LogicalOr => i64::from(l != 0 || r != 0),
        })
    }
}

/// A number as sh reads one: decimal, `0x` hexadecimal, `0` octal.
pub(crate) fn parse_number(v: &str) -> Option<i64> {
    let (neg, digits) = match v.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, v.strip_prefix('+').unwrap_or(v)),
    };
    let n = if let Some(h) = digits
        .strip_prefix("0x")
        .or_else(|| digits.strip_prefix("0X"))
    {
        i64::from_str_radix(h, 16).ok()?
    } else if digits.len() > 1 && digits.starts_with('0') {
        i64::from_str_radix(&digits[1..], 8).ok()?
    } else {
        digits.parse().ok()?
    };
    Some(if neg { n.wrapping_neg() } else { n })
}
