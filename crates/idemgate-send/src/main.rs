//! `idemgate-send PROVIDER [FIXTURE] [options]`; `scripts/send` builds and
//! runs it. See `idemgate_send::cli::USAGE`.

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    std::process::exit(idemgate_send::cli::run(&args));
}
