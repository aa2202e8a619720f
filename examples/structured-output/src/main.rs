//! A typed structured answer on OpenAI Chat Completions: the partial object as it
//! streams, then the validated value.
//!
//! ```text
//! OPENAI_API_KEY=... cargo run -p example-structured-output -- "Ada Lovelace, born 1815 in London"
//! ```
//!
//! Without `OPENAI_API_KEY` it says so and exits successfully, sending nothing.

use std::process::ExitCode;

use clawcall::Message;
use clawcall::llm_core::Context;
use clawcall::llm_core::output::{TypedEvent, stream_typed};

/// What to extract. Every field has a default, so partial values deserialize early.
#[derive(Debug, Default, serde::Deserialize, schemars::JsonSchema)]
#[serde(default)]
struct Person {
    /// Full name.
    name: String,
    /// Year of birth.
    born: Option<i32>,
    /// Places named in the text.
    places: Vec<String>,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    // The model, its provider and the key (OPENAI_API_KEY), from the catalog id.
    let config = match clawcall::agent_config("openai-completions/gpt-5-mini") {
        Ok(config) => config,
        Err(e) => {
            println!("skipped: {e}");
            return ExitCode::SUCCESS;
        }
    };
    let text =
        std::env::args().nth(1).unwrap_or_else(|| "Ada Lovelace, born 1815 in London".to_owned());

    let context = Context {
        system_prompt: Some("Extract the person the user describes.".to_owned()),
        messages: vec![Message::user(text)],
        tools: Vec::new(),
    };

    let mut stream =
        stream_typed::<Person>(&*config.provider, &config.model, &context, &config.options);
    while let Some(event) = stream.next().await {
        match event {
            TypedEvent::Partial(person) => println!("partial: {person:?}"),
            TypedEvent::Done(result) => match *result {
                Ok(done) => {
                    println!("valid: {:?}", done.value);
                    return ExitCode::SUCCESS;
                }
                Err(error) => {
                    eprintln!("error: {error}");
                    return ExitCode::FAILURE;
                }
            },
        }
    }
    ExitCode::FAILURE
}
