//! `xattr set PATH NAME VALUE` and `xattr rm PATH NAME`: extended
//! attributes in a build step, which busybox cannot set. The property test
//! `build::same_image` compiles it (static, no crates) and copies it into
//! its base image. A symlink's own attributes, never its target's.

use std::ffi::CString;
use std::os::raw::{c_char, c_int, c_void};

extern "C" {
    fn lsetxattr(
        path: *const c_char,
        name: *const c_char,
        value: *const c_void,
        size: usize,
        flags: c_int,
    ) -> c_int;
    fn lremovexattr(path: *const c_char, name: *const c_char) -> c_int;
}

fn main() {
    let args: Vec<CString> = std::env::args()
        .skip(1)
        .map(|a| CString::new(a).unwrap())
        .collect();
    let op = args.first().map(|a| a.to_bytes());
    // SAFETY: every pointer is a NUL-terminated string that outlives the call.
    let r = unsafe {
        match (op, &args[..]) {
            (Some(b"set"), [_, path, name, value]) => lsetxattr(
                path.as_ptr(),
                name.as_ptr(),
                value.as_ptr().cast(),
                value.as_bytes().len(),
                0,
            ),
            (Some(b"rm"), [_, path, name]) => lremovexattr(path.as_ptr(), name.as_ptr()),
            _ => {
                eprintln!("usage: xattr set PATH NAME VALUE | xattr rm PATH NAME");
                std::process::exit(2);
            }
        }
    };
    if r != 0 {
        eprintln!("xattr: {}", std::io::Error::last_os_error());
        std::process::exit(1);
    }
}
