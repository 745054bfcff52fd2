//! Parameter expansion: `$X ${X}`, `${X:-w} ${X-w} ${X:=w} ${X=w}
//! ${X:?w} ${X:+w} ${X+w}`, `${#X}`, `${X#p} ${X##p} ${X%p} ${X%%p}`, and
//! the special parameters `$1…`, `$@ $* $# $? $$ $0 $-`. The bash forms
//! the parser also knows (`${X/a/b}`, `${X:1:2}`, `${X^^}`, arrays,
//! `${!X}`) are refused.

use brush_parser::word::{
    Parameter, ParameterExpr as E, ParameterTestType, SpecialParameter as SP,
};

use super::expand::Builder;
use super::shell::{Shell, Streams, R};

/// `$$`: a fixed number, so that a script naming a temporary file after
/// its process makes the same image twice.
pub const PID: &str = "1000";

/// A parameter's value: one string, or the positional parameters
/// (`$@`, `$*`) as separate words.
enum Value {
    Unset,
    One(String),
    Many(Vec<String>, bool),
}

impl Value {
    fn joined(&self, sep: &str) -> Option<String> {
        match self {
            Value::Unset => None,
            Value::One(v) => Some(v.clone()),
            Value::Many(v, _) => Some(v.join(sep)),
        }
    }
}

impl Shell<'_> {
    fn lookup(&self, p: &Parameter, indirect: bool) -> R<(String, Value)> {
        if indirect {
            return Err(self.unsupported("`${!…}` (bash)"));
        }
        let (name, v) = match p {
            Parameter::Positional(0) => ("0".to_string(), Value::One(self.arg0.clone())),
            Parameter::Positional(n) => (
                n.to_string(),
                self.state
                    .positional
                    .get(*n as usize - 1)
                    .map_or(Value::Unset, |v| Value::One(v.clone())),
            ),
            Parameter::Special(sp) => {
                let v = match sp {
                    SP::AllPositionalParameters { concatenate } => {
                        Value::Many(self.state.positional.clone(), *concatenate)
                    }
                    SP::PositionalParameterCount => {
                        Value::One(self.state.positional.len().to_string())
                    }
                    SP::LastExitStatus => Value::One(self.status.to_string()),
                    SP::CurrentOptionFlags => Value::One(self.flags()),
                    SP::ProcessId => Value::One(PID.to_string()),
                    SP::LastBackgroundProcessId => Value::Unset,
                    SP::ShellName => Value::One(self.arg0.clone()),
                };
                (sp.to_string(), v)
            }
            Parameter::Named(n) => (
                n.clone(),
                self.get(n)
                    .map_or(Value::Unset, |v| Value::One(v.to_string())),
            ),
            Parameter::NamedWithIndex { .. } | Parameter::NamedWithAllIndices { .. } => {
                return Err(self.unsupported("arrays (bash)"))
            }
        };
        Ok((name, v))
    }

    /// `$-`.
    pub(crate) fn flags(&self) -> String {
        let o = &self.state.opts;
        [
            (o.errexit, 'e'),
            (o.noglob, 'f'),
            (o.nounset, 'u'),
            (o.xtrace, 'x'),
        ]
        .iter()
        .filter(|(on, _)| *on)
        .map(|(_, c)| *c)
        .collect()
    }

    pub(crate) fn parameter(
        &mut self,
        e: &E,
        quoted: bool,
        b: &mut Builder,
        s: &mut Streams,
    ) -> R<()> {
        match e {
            E::Parameter {
                parameter,
                indirect,
            } => {
                let (name, v) = self.lookup(parameter, *indirect)?;
                self.put(&name, v, quoted, b)
            }
            E::UseDefaultValues {
                parameter,
                indirect,
                test_type,
                default_value,
            } => {
                let (name, v) = self.lookup(parameter, *indirect)?;
                if unset_for(&v, test_type) {
                    self.word_into(default_value.as_deref().unwrap_or(""), quoted, b, s)
                } else {
                    self.put(&name, v, quoted, b)
                }
            }
            E::AssignDefaultValues {
                parameter,
                indirect,
                test_type,
                default_value,
            } => {
                let (name, v) = self.lookup(parameter, *indirect)?;
                if unset_for(&v, test_type) {
                    if !matches!(parameter, Parameter::Named(_)) {
                        return Err(
                            self.shell_error(format!("${{{name}}}: cannot assign in this way"))
                        );
                    }
                    let value = self.expand_string(default_value.as_deref().unwrap_or(""), s)?;
                    self.set(&name, value.clone())?;
                    b.expanded(&value, quoted);
                    Ok(())
                } else {
                    self.put(&name, v, quoted, b)
                }
            }
            E::IndicateErrorIfNullOrUnset {
                parameter,
                indirect,
                test_type,
                error_message,
            } => {
                let (name, v) = self.lookup(parameter, *indirect)?;
                if unset_for(&v, test_type) {
                    let m = match error_message {
                        Some(m) if !m.is_empty() => self.expand_string(m, s)?,
                        _ => "parameter null or not set".to_string(),
                    };
                    return Err(self.shell_error(format!("{name}: {m}")));
                }
                self.put(&name, v, quoted, b)
            }
            E::UseAlternativeValue {
                parameter,
                indirect,
                test_type,
                alternative_value,
            } => {
                let (_, v) = self.lookup(parameter, *indirect)?;
                if !unset_for(&v, test_type) {
                    self.word_into(alternative_value.as_deref().unwrap_or(""), quoted, b, s)?;
                } else if quoted {
                    b.lit("", true);
                }
                Ok(())
            }
            E::ParameterLength {
                parameter,
                indirect,
            } => {
                let (name, v) = self.lookup(parameter, *indirect)?;
                let v = self.nounset(&name, v)?;
                let n = match &v {
                    Value::Many(all, _) => all.len(),
                    _ => v.joined(" ").unwrap_or_default().chars().count(),
                };
                b.expanded(&n.to_string(), quoted);
                Ok(())
            }
            E::RemoveSmallestSuffixPattern {
                parameter,
                indirect,
                pattern,
            }
            | E::RemoveLargestSuffixPattern {
                parameter,
                indirect,
                pattern,
            }
            | E::RemoveSmallestPrefixPattern {
                parameter,
                indirect,
                pattern,
            }
            | E::RemoveLargestPrefixPattern {
                parameter,
                indirect,
                pattern,
            } => {
                let (name, v) = self.lookup(parameter, *indirect)?;
                let v = self.nounset(&name, v)?;
                let value = v.joined(" ").unwrap_or_default();
                let pat = self.expand_pattern(pattern.as_deref().unwrap_or(""), s)?;
                let out = match e {
                    E::RemoveSmallestSuffixPattern { .. } => pat.strip_suffix(&value, false),
                    E::RemoveLargestSuffixPattern { .. } => pat.strip_suffix(&value, true),
                    E::RemoveSmallestPrefixPattern { .. } => pat.strip_prefix(&value, false),
                    _ => pat.strip_prefix(&value, true),
                };
                b.expanded(out, quoted);
                Ok(())
            }
            E::Substring { .. } => Err(self.unsupported("`${X:offset:length}` (bash)")),
            E::ReplaceSubstring { .. } => Err(self.unsupported("`${X/pattern/string}` (bash)")),
            _ => Err(self.unsupported("this `${…}` form (bash)")),
        }
    }

    /// `set -u`: an unset parameter is sh's error.
    fn nounset(&self, name: &str, v: Value) -> R<Value> {
        if matches!(v, Value::Unset) && self.state.opts.nounset {
            return Err(self.shell_error(format!("{name}: parameter not set")));
        }
        Ok(v)
    }

    fn put(&mut self, name: &str, v: Value, quoted: bool, b: &mut Builder) -> R<()> {
        match self.nounset(name, v)? {
            Value::Unset => {}
            Value::One(v) => b.expanded(&v, quoted),
            Value::Many(all, concatenate) => {
                if quoted && concatenate {
                    let sep: String = self.get("IFS").unwrap_or(" ").chars().take(1).collect();
                    b.expanded(&all.join(&sep), true);
                } else {
                    for (i, w) in all.iter().enumerate() {
                        if i > 0 {
                            b.end_field();
                        }
                        b.expanded(w, quoted);
                    }
                }
            }
        }
        Ok(())
    }

    /// The word of `${X:-word}` and `${X:+word}`, expanded in place (its
    /// own quotes kept, split if the whole is unquoted).
    fn word_into(&mut self, text: &str, quoted: bool, b: &mut Builder, s: &mut Streams) -> R<()> {
        let pieces = brush_parser::word::parse(text, &super::parser_options()).map_err(|e| {
            super::ScriptError::Parse {
                line: self.line,
                message: format!("{e}"),
            }
        })?;
        if quoted {
            b.lit("", true);
            return self.pieces(&pieces, true, b, s);
        }
        for p in &pieces {
            match &p.piece {
                // Unquoted text of the word is split like an expansion.
                brush_parser::word::WordPiece::Text(t) => b.expanded(t, false),
                other => self.piece(other, false, b, s)?,
            }
        }
        Ok(())
    }
}

fn unset_for(v: &Value, t: &ParameterTestType) -> bool {
    match v {
        Value::Unset => true,
        Value::One(s) => matches!(t, ParameterTestType::UnsetOrNull) && s.is_empty(),
        Value::Many(all, _) => matches!(t, ParameterTestType::UnsetOrNull) && all.is_empty(),
    }
}
