fn main() {
    std::process::exit(herdr_nmhost::cli::main(std::env::args_os().collect()));
}
