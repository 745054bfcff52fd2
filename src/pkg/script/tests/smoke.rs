//! The shell's semantics, one feature a test, as FreeBSD's sh gives them.

use super::{out, sh, Recorder};

#[test]
fn echo_and_variables() {
    assert_eq!(out("X=hello; echo \"$X world\""), "hello world\n");
    assert_eq!(out("echo -n a; echo b"), "ab\n");
    assert_eq!(out("echo -e 'a\\tb\\c'; echo x"), "a\tbx\n");
    assert_eq!(out("echo 'a\\tb'"), "a\\tb\n");
}

#[test]
fn parameter_expansion() {
    let t = r#"
X=/usr/local/etc/foo.conf.sample E=
echo ${X#*/} ${X##*/} ${X%.*} ${X%%.*} ${#X}
echo ${U:-def} ${E:-def} ${E-def}x ${U-def} ${X:+alt} ${U:+alt}x
echo ${N:=set} $N
W='a   b'; echo "${U:-$W}" ${U:-$W}
"#;
    assert_eq!(
        out(t),
        "usr/local/etc/foo.conf.sample foo.conf.sample /usr/local/etc/foo.conf /usr/local/etc/foo 30\ndef def x def alt x\nset set\na   b a b\n"
    );
}

#[test]
fn positional_and_special() {
    let dir = tempfile::tempdir().unwrap();
    let script = super::parse("echo $# $1 $2; for a in \"$@\"; do echo \"<$a>\"; done; echo \"$*\"; shift; echo $1; set -- x y; echo $@ $?; false; echo $?").unwrap();
    let env = super::Env {
        vars: vec![],
        args: vec!["pkg-1.0".into(), "POST INSTALL".into()],
    };
    let ran = super::run(
        dir.path(),
        &script,
        &env,
        &mut Recorder::default(),
        &super::Limits::default(),
    )
    .unwrap();
    assert_eq!(
        String::from_utf8(ran.stdout).unwrap(),
        "2 pkg-1.0 POST INSTALL\n<pkg-1.0>\n<POST INSTALL>\npkg-1.0 POST INSTALL\nPOST INSTALL\nx y 0\n1\n"
    );
}

#[test]
fn field_splitting_and_quotes() {
    assert_eq!(
        out("A='1  2 3'; for x in $A; do echo \"[$x]\"; done"),
        "[1]\n[2]\n[3]\n"
    );
    assert_eq!(
        out("A='1  2'; for x in \"$A\"; do echo \"[$x]\"; done"),
        "[1  2]\n"
    );
    assert_eq!(
        out("IFS=:; A=a:b::c; for x in $A; do echo \"[$x]\"; done"),
        "[a]\n[b]\n[]\n[c]\n"
    );
    assert_eq!(
        out("echo \"a\\\"b\" 'c\"d' e\\ f \"\\$x\""),
        "a\"b c\"d e f $x\n"
    );
    assert_eq!(
        out("set -- ''; echo $#; set -- \"\"\"\"; echo $#"),
        "1\n1\n"
    );
}

#[test]
fn control_flow() {
    let t = r#"
if false; then echo no; elif true; then echo elif; else echo no; fi
i=0; while [ $i -lt 3 ]; do i=$((i+1)); done; echo $i
until [ $i -eq 0 ]; do i=$((i - 1)); done; echo $i
for x in a b c; do if [ $x = b ]; then continue; fi; echo $x; done
for x in 1 2 3; do for y in 1 2; do [ $y = 2 ] && break 2; echo $x$y; done; done
true && echo and; false || echo or; ! false && echo not
case "foo.conf" in *.sample) echo s ;; *.conf|*.cf) echo conf ;; *) echo other ;; esac
case x in [abc]) echo abc ;; [!x]) echo notx ;; ?) echo one ;; esac
"#;
    assert_eq!(out(t), "elif\n3\n0\na\nc\n11\nand\nor\nnot\nconf\none\n");
}

#[test]
fn functions_locals_and_return() {
    let t = r#"
f() { local v=inner; echo "$1 $v $#"; return 3; }
v=outer; f a b; echo $? $v
g() { echo g; }
g
"#;
    assert_eq!(out(t), "a inner 2\n3 outer\ng\n");
}

#[test]
fn substitution_and_arithmetic() {
    assert_eq!(out("X=$(echo a; echo b); echo \"$X\""), "a\nb\n");
    assert_eq!(
        out("echo `echo hi` $(( 2 + 3 * 4 )) $(( (7 % 4) << 2 )) $((010 + 0x10))"),
        "hi 14 12 24\n"
    );
    assert_eq!(out("n=5; echo $((n * 2)) $(( n > 3 ? 1 : 0 ))"), "10 1\n");
    assert_eq!(out("X=$(exit 3); echo $?"), "3\n");
}

#[test]
fn pipelines_and_text_utilities() {
    assert_eq!(
        out("printf 'a\\nb\\nc\\n' | grep -v b | wc -l | tr -d ' '"),
        "2\n"
    );
    assert_eq!(
        out("echo 'root wheel operator' | grep -qw wheel && echo yes"),
        "yes\n"
    );
    assert_eq!(out("echo 'wheelx' | grep -qw wheel || echo no"), "no\n");
    assert_eq!(out("printf '1\\n2\\n3\\n' | head -n 2"), "1\n2\n");
    assert_eq!(
        out("echo ABC | tr 'A-Z' 'a-z'; basename /a/b/c.so .so; dirname /a/b/c"),
        "abc\nc\n/a/b\n"
    );
    assert_eq!(out("printf 'x1\\nx2\\ny\\n' | grep -c '^x[0-9]$'"), "2\n");
    assert_eq!(
        out("echo 'a+b' | grep -E 'a\\+b' && echo 'a|b' | grep -F 'a|b'"),
        "a+b\na|b\n"
    );
    assert_eq!(out("echo foo | { read x; echo got $x; }"), "got foo\n");
    assert_eq!(
        out("printf 'a b c\\nd\\n' | while read x y; do echo \"$x|$y\"; done"),
        "a|b c\nd|\n"
    );
}

#[test]
fn printf_formats() {
    assert_eq!(
        out("printf '%s-%d-%05.1f\\n' a 42 2; printf '%3s|%-3s|%x|%o|%%\\n' a b 255 8; printf '%s\\n' x y"),
        "a-42-002.0\n  a|b  |ff|10|%\nx\ny\n"
    );
}

#[test]
fn test_builtin() {
    let t = r#"
[ -z "" ] && echo z; [ -n x ] && echo n; [ a = a ] && echo eq; [ a != b ] && echo ne
[ 3 -gt 2 -a 1 -le 1 ] && echo and; [ ! -e /nonexistent ] && echo missing
test -d / && echo dir; [ "(" a = b ")" -o x ] && echo paren
[ -n ] && echo lone
"#;
    assert_eq!(out(t), "z\nn\neq\nne\nand\nmissing\ndir\nparen\nlone\n");
}

#[test]
fn subshells_and_groups() {
    assert_eq!(
        out("X=1; (X=2; cd /tmp 2>/dev/null; exit 4); echo $? $X; { X=3; }; echo $X"),
        "4 1\n3\n"
    );
}

#[test]
fn here_documents() {
    let t = "X=val\ncat <<EOF\nline $X\n  \\$X `echo q`\nEOF\ncat <<'EOF'\nraw $X\nEOF\ncat <<-EOF\n\tindented\n\tEOF\n";
    assert_eq!(out(t), "line val\n  $X q\nraw $X\nindented\n");
}

#[test]
fn set_e_and_exit() {
    let dir = tempfile::tempdir().unwrap();
    let mut h = Recorder::default();
    let r = sh(
        dir.path(),
        "set -e; false || true; if false; then :; fi; echo a; false; echo b",
        &mut h,
    )
    .unwrap();
    assert_eq!((r.status, r.stdout), (1, b"a\n".to_vec()));
    let r = sh(dir.path(), "echo a; exit 3; echo b", &mut h).unwrap();
    assert_eq!((r.status, r.stdout), (3, b"a\n".to_vec()));
    let r = sh(dir.path(), "false", &mut h).unwrap();
    assert_eq!(r.status, 1);
}

#[test]
fn set_x_traces_to_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let r = sh(
        dir.path(),
        "set -x; X=1 echo \"a b\"",
        &mut Recorder::default(),
    )
    .unwrap();
    assert_eq!(String::from_utf8(r.stderr).unwrap(), "+ X=1 echo a b\n");
}

#[test]
fn eval_and_command_v() {
    let dir = tempfile::tempdir().unwrap();
    let mut h = Recorder {
        known: vec!["pw".into()],
        ..Default::default()
    };
    let r = sh(
        dir.path(),
        "eval 'X=1; echo $X'; command -v pw; command -v echo; command -v install; command -v nope || echo none $?",
        &mut h,
    )
    .unwrap();
    assert_eq!(
        String::from_utf8(r.stdout).unwrap(),
        "1\npw\necho\n/usr/bin/install\nnone 127\n"
    );
}

#[test]
fn readonly_assignment_is_shells_error() {
    let dir = tempfile::tempdir().unwrap();
    let r = sh(
        dir.path(),
        "readonly R=1; R=2; echo after",
        &mut Recorder::default(),
    )
    .unwrap();
    assert_eq!(r.status, 2);
    assert!(String::from_utf8_lossy(&r.stderr).contains("R: is read only"));
    assert!(r.stdout.is_empty());
}
