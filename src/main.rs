fn main() {
    std::process::exit(jbuild_cli_main());
}

fn jbuild_cli_main() -> i32 {
    eprintln!("jbuild: the command line arrives with the build engine");
    2
}
