//! Asking the person at the terminal (`jbuild login` without `-u` or
//! `--password-stdin`): the question goes to standard error, the answer
//! comes from standard input, and a password is read with echo turned off
//! (and turned back on however the read ends). Never used when standard
//! input is not a terminal: a script gets an error, not a hang.

use std::io::{BufRead, IsTerminal, Write};

use nix::sys::termios::{self, LocalFlags, SetArg};

/// Whether standard input is a terminal someone can answer on.
pub fn interactive() -> bool {
    std::io::stdin().is_terminal()
}

/// One line typed after `question` (without its line end).
pub fn line(question: &str) -> std::io::Result<String> {
    ask(question)?;
    read_line()
}

/// One line typed after `question`, not shown as it is typed.
pub fn secret(question: &str) -> std::io::Result<String> {
    ask(question)?;
    let stdin = std::io::stdin();
    let saved = termios::tcgetattr(&stdin).map_err(std::io::Error::from)?;
    let mut quiet = saved.clone();
    quiet.local_flags.remove(LocalFlags::ECHO);
    // The line end still echoes, so the next output starts on a new line.
    quiet.local_flags.insert(LocalFlags::ECHONL);
    termios::tcsetattr(&stdin, SetArg::TCSAFLUSH, &quiet).map_err(std::io::Error::from)?;
    let read = read_line();
    let restored = termios::tcsetattr(&stdin, SetArg::TCSAFLUSH, &saved);
    let text = read?;
    restored.map_err(std::io::Error::from)?;
    Ok(text)
}

fn ask(question: &str) -> std::io::Result<()> {
    let mut err = std::io::stderr().lock();
    err.write_all(question.as_bytes())?;
    err.flush()
}

fn read_line() -> std::io::Result<String> {
    let mut s = String::new();
    if std::io::stdin().lock().read_line(&mut s)? == 0 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "standard input ended",
        ));
    }
    Ok(s.trim_end_matches(['\n', '\r']).to_string())
}
