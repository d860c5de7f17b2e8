fn main() {
    if let Some(refusal) = herdr_nmhost::platform::unsupported(std::env::consts::OS) {
        eprintln!("herdr-nmhost: {refusal}");
        std::process::exit(1);
    }
    std::process::exit(herdr_nmhost::cli::main(std::env::args_os().collect()));
}
