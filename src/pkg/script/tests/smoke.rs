use super::out;

#[test]
fn echo_and_variables() {
    assert_eq!(out("X=hello; echo \"$X world\""), "hello world\n");
}
