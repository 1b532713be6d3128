//! Streams a completion of a code prompt with the embedded model (or --model DIR).
//!
//!     vegas-complete [--model DIR] [--max-tokens N] [--backend auto|cpu|cuda] ['PROMPT']
//!
//! `\n` in the prompt is a newline. Errors print the library's status and message.
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use vegas::{Backend, Model, ModelOptions, Request, SessionOptions};

struct Args {
    model: PathBuf,
    prompt: String,
    max_tokens: i32,
    backend: Backend,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        model: PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../models/vegas-code-22m"),
        prompt: "def quicksort(xs):\n".to_string(),
        max_tokens: 64,
        backend: Backend::Auto,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = || it.next().ok_or(format!("{} needs a value", arg));
        match arg.as_str() {
            "--model" => args.model = PathBuf::from(value()?),
            "--max-tokens" => {
                args.max_tokens = value()?
                    .parse()
                    .map_err(|e| format!("--max-tokens: {}", e))?
            }
            "--backend" => {
                args.backend = match value()?.as_str() {
                    "auto" => Backend::Auto,
                    "cpu" => Backend::Cpu,
                    "cuda" => Backend::Cuda,
                    other => return Err(format!("unknown backend {:?}", other)),
                }
            }
            _ if arg.starts_with("--") => return Err(format!("unknown option {}", arg)),
            _ => args.prompt = arg.replace("\\n", "\n"),
        }
    }
    Ok(args)
}

fn complete(args: &Args) -> vegas::Result<()> {
    let options = ModelOptions {
        backend: args.backend,
        ..ModelOptions::default()
    };
    let model = Model::load_with(&args.model, &options)?;
    let prompt = model.tokenizer()?.encode(&args.prompt)?;
    let mut session = model.session(&SessionOptions::default())?;
    let mut out = std::io::stdout();
    print!("{}", args.prompt);
    for token in session.stream(&Request::new(&prompt).max_tokens(args.max_tokens))? {
        print!("{}", token?.text);
        let _ = out.flush();
    }
    println!();
    Ok(())
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(args) => args,
        Err(message) => {
            eprintln!("vegas-complete: {}", message);
            return ExitCode::from(2);
        }
    };
    match complete(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("vegas-complete: {}", e);
            ExitCode::FAILURE
        }
    }
}
