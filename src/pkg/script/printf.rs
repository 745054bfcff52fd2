//! `printf` as printf(1) (`%s %b %c %d %i %u %o %x %X %%`, flags, width,
//! precision, the format reused while arguments remain) and the
//! backslash escapes shared with `echo -e` and `$'…'`.

use super::shell::Streams;

/// Backslash escapes: `\\ \a \b \f \n \r \t \v \0NNN \NNN`; in `echo`
/// mode (and `%b`) `\c` stops all output (the `bool`).
pub(crate) fn escapes(text: &str, echo: bool) -> (String, bool) {
    let mut out = String::new();
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        i += 1;
        if c != '\\' || i >= chars.len() {
            out.push(c);
            continue;
        }
        let e = chars[i];
        i += 1;
        match e {
            '\\' => out.push('\\'),
            'a' => out.push('\x07'),
            'b' => out.push('\x08'),
            'f' => out.push('\x0c'),
            'n' => out.push('\n'),
            'r' => out.push('\r'),
            't' => out.push('\t'),
            'v' => out.push('\x0b'),
            'e' | 'E' => out.push('\x1b'),
            '\'' => out.push('\''),
            '"' => out.push('"'),
            'c' if echo => return (out, true),
            '0'..='7' => {
                // `\0NNN` in echo mode, `\NNN` otherwise.
                let mut n = 0u32;
                let mut digits = 0;
                let max = if echo && e == '0' { 3 } else { 2 };
                if !(echo && e == '0') {
                    n = e.to_digit(8).unwrap_or(0);
                }
                while digits < max && i < chars.len() && chars[i].is_digit(8) {
                    n = n * 8 + chars[i].to_digit(8).unwrap_or(0);
                    i += 1;
                    digits += 1;
                }
                out.push(char::from_u32(n & 0xff).unwrap_or('?'));
            }
            other => {
                out.push('\\');
                out.push(other);
            }
        }
    }
    (out, false)
}

/// printf(1); its status: 0, or 1 after a bad number (still printed as
/// far as it goes).
pub(crate) fn printf(args: &[String], s: &mut Streams) -> i32 {
    let Some(format) = args.first() else {
        s.err
            .extend_from_slice(b"usage: printf format [arguments ...]\n");
        return 2;
    };
    let format: Vec<char> = format.chars().collect();
    let mut rest = args[1..].iter();
    let mut status = 0;
    let mut out = String::new();
    loop {
        let mut consumed = false;
        let mut i = 0;
        while i < format.len() {
            let c = format[i];
            i += 1;
            if c == '\\' {
                let start = i - 1;
                let mut end = i + 1;
                if i < format.len() && format[i].is_digit(8) {
                    while end < format.len() && end < i + 3 && format[end].is_digit(8) {
                        end += 1;
                    }
                }
                let piece: String = format[start..end.min(format.len())].iter().collect();
                let (t, _) = escapes(&piece, false);
                out.push_str(&t);
                i = end.min(format.len());
                continue;
            }
            if c != '%' {
                out.push(c);
                continue;
            }
            if i < format.len() && format[i] == '%' {
                out.push('%');
                i += 1;
                continue;
            }
            let mut flags = String::new();
            while i < format.len() && "-+ #0".contains(format[i]) {
                flags.push(format[i]);
                i += 1;
            }
            let number =
                |i: &mut usize, rest: &mut std::slice::Iter<String>, consumed: &mut bool| {
                    if *i < format.len() && format[*i] == '*' {
                        *i += 1;
                        *consumed = true;
                        return rest.next().and_then(|a| a.parse::<i64>().ok());
                    }
                    let st = *i;
                    while *i < format.len() && format[*i].is_ascii_digit() {
                        *i += 1;
                    }
                    format[st..*i]
                        .iter()
                        .collect::<String>()
                        .parse::<i64>()
                        .ok()
                };
            let width = number(&mut i, &mut rest, &mut consumed);
            let precision = if i < format.len() && format[i] == '.' {
                i += 1;
                Some(number(&mut i, &mut rest, &mut consumed).unwrap_or(0))
            } else {
                None
            };
            let Some(&conv) = format.get(i) else {
                s.err
                    .extend_from_slice(b"printf: missing format character\n");
                return 1;
            };
            i += 1;
            let arg = rest.next();
            if arg.is_some() {
                consumed = true;
            }
            let a = arg.map(String::as_str).unwrap_or("");
            let (body, stop) = match conv {
                's' => (
                    precision.map_or(a.to_string(), |p| {
                        a.chars().take(p.max(0) as usize).collect()
                    }),
                    false,
                ),
                'b' => escapes(a, true),
                'c' => (
                    a.chars().next().map(String::from).unwrap_or_default(),
                    false,
                ),
                'd' | 'i' | 'u' | 'o' | 'x' | 'X' => {
                    let n = match number_arg(a) {
                        Ok(n) => n,
                        Err(()) => {
                            s.err.extend_from_slice(
                                format!("printf: {a}: invalid number\n").as_bytes(),
                            );
                            status = 1;
                            0
                        }
                    };
                    (integer(n, conv, &flags, precision), false)
                }
                'f' | 'F' | 'e' | 'E' | 'g' | 'G' => {
                    let x: f64 = a.trim().parse().unwrap_or_else(|_| {
                        if !a.is_empty() {
                            s.err.extend_from_slice(
                                format!("printf: {a}: invalid number\n").as_bytes(),
                            );
                            status = 1;
                        }
                        0.0
                    });
                    let p = precision.unwrap_or(6).max(0) as usize;
                    let body = match conv {
                        'e' | 'E' => format!("{x:.p$e}"),
                        'g' | 'G' => format!("{x}"),
                        _ => format!("{x:.p$}"),
                    };
                    let body = if flags.contains('+') && x >= 0.0 {
                        format!("+{body}")
                    } else {
                        body
                    };
                    (body, false)
                }
                other => {
                    s.err.extend_from_slice(
                        format!("printf: illegal format character {other}\n").as_bytes(),
                    );
                    return 1;
                }
            };
            out.push_str(&pad(
                &body,
                width,
                &flags,
                matches!(conv, 'd' | 'i' | 'u' | 'o' | 'x' | 'X' | 'f' | 'F'),
            ));
            if stop {
                s.out.extend_from_slice(out.as_bytes());
                return status;
            }
        }
        if !consumed || rest.len() == 0 {
            break;
        }
    }
    s.out.extend_from_slice(out.as_bytes());
    status
}

fn number_arg(a: &str) -> Result<i64, ()> {
    if a.is_empty() {
        return Ok(0);
    }
    if let Some(c) = a.strip_prefix('\'').or_else(|| a.strip_prefix('"')) {
        return Ok(c.chars().next().map_or(0, |c| c as i64));
    }
    super::arith::parse_number(a.trim()).ok_or(())
}

fn integer(n: i64, conv: char, flags: &str, precision: Option<i64>) -> String {
    let mut digits = match conv {
        'o' => format!("{:o}", n),
        'x' => format!("{:x}", n),
        'X' => format!("{:X}", n),
        'u' => format!("{}", n as u64),
        _ => n.unsigned_abs().to_string(),
    };
    if let Some(p) = precision {
        while (digits.len() as i64) < p {
            digits.insert(0, '0');
        }
    }
    let sign = if matches!(conv, 'd' | 'i') {
        if n < 0 {
            "-"
        } else if flags.contains('+') {
            "+"
        } else if flags.contains(' ') {
            " "
        } else {
            ""
        }
    } else {
        ""
    };
    let prefix = match (conv, flags.contains('#')) {
        ('o', true) if !digits.starts_with('0') => "0",
        ('x', true) if n != 0 => "0x",
        ('X', true) if n != 0 => "0X",
        _ => "",
    };
    format!("{sign}{prefix}{digits}")
}

fn pad(body: &str, width: Option<i64>, flags: &str, numeric: bool) -> String {
    let w = width.unwrap_or(0);
    let (left, w) = if w < 0 {
        (true, (-w) as usize)
    } else {
        (flags.contains('-'), w as usize)
    };
    let len = body.chars().count();
    if len >= w {
        return body.to_string();
    }
    let fill = w - len;
    if left {
        format!("{body}{}", " ".repeat(fill))
    } else if numeric && flags.contains('0') {
        let (sign, digits) = match body.chars().next() {
            Some(c @ ('-' | '+' | ' ')) => (c.to_string(), &body[1..]),
            _ => (String::new(), body),
        };
        format!("{sign}{}{digits}", "0".repeat(fill))
    } else {
        format!("{}{body}", " ".repeat(fill))
    }
}
