//! Control flow: lists, `&&`/`||`, `!`, pipelines, compound commands,
//! functions and subshells, with `set -e` as sh(1) applies it.

use std::rc::Rc;

use brush_parser::ast::{
    self, AndOr, Command, CompoundCommand, CompoundList, SeparatorOperator, SourceLocation,
};

use super::shell::{Ctl, Shell, Streams, R};

impl Shell<'_> {
    pub(crate) fn program(&mut self, p: &ast::Program, s: &mut Streams) -> R<i32> {
        let mut status = 0;
        for c in &p.complete_commands {
            status = self.list(c, s)?;
        }
        Ok(status)
    }

    pub(crate) fn list(&mut self, l: &CompoundList, s: &mut Streams) -> R<i32> {
        let mut status = self.status;
        for item in &l.0 {
            if matches!(item.1, SeparatorOperator::Async) {
                self.at(item.0.location());
                return Err(self.unsupported("a background job (`&`)"));
            }
            status = self.and_or(&item.0, s)?;
        }
        Ok(status)
    }

    /// Notes the line of what runs next.
    pub(crate) fn at(&mut self, loc: Option<brush_parser::SourceSpan>) {
        if let Some(span) = loc {
            self.line = self.line_base + span.start.line - 1;
        }
    }

    fn and_or(&mut self, l: &ast::AndOrList, s: &mut Streams) -> R<i32> {
        let last = l.additional.len();
        // The left of `&&`/`||` is a condition for `set -e`.
        let mut status = self.conditional(last > 0, |sh| sh.pipeline(&l.first, s))?;
        for (i, next) in l.additional.iter().enumerate() {
            let (run, p) = match next {
                AndOr::And(p) => (status == 0, p),
                AndOr::Or(p) => (status != 0, p),
            };
            if run {
                status = self.conditional(i + 1 < last, |sh| sh.pipeline(p, s))?;
            }
        }
        Ok(status)
    }

    /// Runs `f` as a condition when `cond` (`set -e` ignores its status).
    pub(crate) fn conditional<T>(&mut self, cond: bool, f: impl FnOnce(&mut Self) -> R<T>) -> R<T> {
        if cond {
            self.condition += 1;
        }
        let r = f(self);
        if cond {
            self.condition -= 1;
        }
        r
    }

    fn pipeline(&mut self, p: &ast::Pipeline, s: &mut Streams) -> R<i32> {
        if p.timed.is_some() {
            return Err(self.unsupported("`time`"));
        }
        let status = self.conditional(p.bang, |sh| {
            if p.seq.len() == 1 {
                return sh.command(&p.seq[0], s);
            }
            // Stages run one after the other, each one's output the next
            // one's input; each stage is a subshell, as in sh.
            let mut input = Rc::clone(&s.input);
            let mut pos = s.pos;
            let mut status = 0;
            for (i, c) in p.seq.iter().enumerate() {
                let mut stage = Streams {
                    input,
                    pos,
                    ..Streams::default()
                };
                status = sh.subshell(|sh| sh.command(c, &mut stage))?;
                s.err.append(&mut stage.err);
                if i + 1 == p.seq.len() {
                    s.out.append(&mut stage.out);
                }
                input = Rc::new(std::mem::take(&mut stage.out));
                pos = 0;
                sh.check_output(s)?;
            }
            Ok(status)
        })?;
        let status = if p.bang {
            i32::from(status == 0)
        } else {
            status
        };
        self.status = status;
        if status != 0 && !p.bang && self.condition == 0 && self.state.opts.errexit {
            return Err(Ctl::Exit(status));
        }
        Ok(status)
    }

    pub(crate) fn command(&mut self, c: &Command, s: &mut Streams) -> R<i32> {
        self.at(c.location());
        let status = match c {
            Command::Simple(sc) => self.simple(sc, s)?,
            Command::Compound(cc, redirects) => {
                self.enter("compound commands")?;
                let r = self.with_redirects(
                    redirects.as_ref().map(|r| &r.0[..]).unwrap_or(&[]),
                    s,
                    |sh, s| sh.compound(cc, s),
                );
                self.leave();
                r?
            }
            Command::Function(f) => {
                let name = f.fname.value.clone();
                self.state.functions.insert(name, Rc::new(f.body.clone()));
                0
            }
            Command::ExtendedTest(..) => return Err(self.unsupported("`[[ … ]]` (bash)")),
        };
        self.status = status;
        Ok(status)
    }

    fn compound(&mut self, c: &CompoundCommand, s: &mut Streams) -> R<i32> {
        match c {
            CompoundCommand::BraceGroup(b) => self.list(&b.list, s),
            CompoundCommand::Subshell(sub) => self.subshell(|sh| sh.list(&sub.list, s)),
            CompoundCommand::IfClause(i) => {
                if self.conditional(true, |sh| sh.list(&i.condition, s))? == 0 {
                    return self.list(&i.then, s);
                }
                for e in i.elses.iter().flatten() {
                    match &e.condition {
                        Some(c) => {
                            if self.conditional(true, |sh| sh.list(c, s))? == 0 {
                                return self.list(&e.body, s);
                            }
                        }
                        None => return self.list(&e.body, s),
                    }
                }
                Ok(0)
            }
            CompoundCommand::WhileClause(w) => self.while_loop(w, true, s),
            CompoundCommand::UntilClause(w) => self.while_loop(w, false, s),
            CompoundCommand::ForClause(f) => {
                let values = match &f.values {
                    Some(words) => {
                        let mut v = Vec::new();
                        for w in words {
                            v.extend(self.expand_fields(&w.value, s)?);
                        }
                        v
                    }
                    None => self.state.positional.clone(),
                };
                self.check_words(&values)?;
                let mut status = 0;
                for value in values {
                    self.at(Some(f.loc.clone()));
                    self.count_iteration()?;
                    self.set(&f.variable_name, value)?;
                    match self.list(&f.body.list, s) {
                        Ok(st) => status = st,
                        Err(Ctl::Break(n)) => {
                            if n > 1 {
                                return Err(Ctl::Break(n - 1));
                            }
                            break;
                        }
                        Err(Ctl::Continue(n)) => {
                            if n > 1 {
                                return Err(Ctl::Continue(n - 1));
                            }
                        }
                        Err(e) => return Err(e),
                    }
                }
                Ok(status)
            }
            CompoundCommand::CaseClause(c) => self.case(c, s),
            CompoundCommand::Arithmetic(_) | CompoundCommand::ArithmeticForClause(_) => {
                Err(self.unsupported("`(( … ))` (bash)"))
            }
            CompoundCommand::Coprocess(_) => Err(self.unsupported("`coproc` (bash)")),
        }
    }

    fn while_loop(
        &mut self,
        w: &ast::WhileOrUntilClauseCommand,
        want: bool,
        s: &mut Streams,
    ) -> R<i32> {
        let mut status = 0;
        loop {
            self.at(Some(w.2.clone()));
            self.count_iteration()?;
            let cond = self.conditional(true, |sh| sh.list(&w.0, s))?;
            if (cond == 0) != want {
                break;
            }
            match self.list(&w.1.list, s) {
                Ok(st) => status = st,
                Err(Ctl::Break(n)) => {
                    if n > 1 {
                        return Err(Ctl::Break(n - 1));
                    }
                    break;
                }
                Err(Ctl::Continue(n)) => {
                    if n > 1 {
                        return Err(Ctl::Continue(n - 1));
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Ok(status)
    }

    fn case(&mut self, c: &ast::CaseClauseCommand, s: &mut Streams) -> R<i32> {
        let value = self.expand_string(&c.value.value, s)?;
        let mut i = 0;
        while i < c.cases.len() {
            let item = &c.cases[i];
            let mut hit = false;
            for p in &item.patterns {
                let pattern = self.expand_pattern(&p.value, s)?;
                if pattern.matches(&value) {
                    hit = true;
                    break;
                }
            }
            if hit {
                let mut status = 0;
                let mut j = i;
                loop {
                    if let Some(cmd) = &c.cases[j].cmd {
                        status = self.list(cmd, s)?;
                    }
                    match c.cases[j].post_action {
                        ast::CaseItemPostAction::ExitCase => return Ok(status),
                        ast::CaseItemPostAction::UnconditionallyExecuteNextCaseItem
                            if j + 1 < c.cases.len() =>
                        {
                            j += 1
                        }
                        _ => return Ok(status),
                    }
                }
            }
            i += 1;
        }
        Ok(0)
    }

    /// Runs `f` in a subshell: what it changes is forgotten, `exit` ends
    /// only it.
    pub(crate) fn subshell(&mut self, f: impl FnOnce(&mut Self) -> R<i32>) -> R<i32> {
        self.enter("subshells")?;
        let saved = self.state.clone();
        let condition = self.condition;
        let r = f(self);
        self.state = saved;
        self.condition = condition;
        self.leave();
        match r {
            Ok(st) | Err(Ctl::Exit(st)) | Err(Ctl::Return(st)) => Ok(st),
            Err(Ctl::Break(_)) | Err(Ctl::Continue(_)) => Ok(self.status),
            Err(e) => Err(e),
        }
    }

    /// Calls a function with `args` as its positional parameters.
    pub(crate) fn call(
        &mut self,
        body: &ast::FunctionBody,
        args: Vec<String>,
        s: &mut Streams,
    ) -> R<i32> {
        self.enter("function calls")?;
        let saved = std::mem::replace(&mut self.state.positional, args);
        self.state.locals.push(Vec::new());
        let redirects = body.1.as_ref().map(|r| &r.0[..]).unwrap_or(&[]);
        let r = self.with_redirects(redirects, s, |sh, s| sh.compound(&body.0, s));
        let locals = self.state.locals.pop().unwrap_or_default();
        for (name, old) in locals.into_iter().rev() {
            match old {
                Some(v) => {
                    self.state.var_bytes += name.len() + v.value.len();
                    if let Some(cur) = self.state.vars.insert(name.clone(), v) {
                        self.state.var_bytes -= name.len() + cur.value.len();
                    }
                }
                None => {
                    if let Some(cur) = self.state.vars.remove(&name) {
                        self.state.var_bytes -= name.len() + cur.value.len();
                    }
                }
            }
        }
        self.state.positional = saved;
        self.leave();
        match r {
            Ok(st) | Err(Ctl::Return(st)) => Ok(st),
            Err(e) => Err(e),
        }
    }

    /// Runs nested program text (`eval`'s) in this shell.
    pub(crate) fn eval_text(&mut self, text: &str, s: &mut Streams) -> R<i32> {
        let script = super::parse_at(text, self.line)?;
        self.enter("eval")?;
        let base = std::mem::replace(&mut self.line_base, self.line);
        let r = self.program(&script.program, s);
        self.line_base = base;
        self.leave();
        r
    }
}
