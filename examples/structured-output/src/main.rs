//! A typed structured answer on OpenAI Chat Completions: the partial object as it
//! streams, then the validated value.
//!
//! ```text
//! OPENAI_API_KEY=... cargo run -p example-structured-output -- "Ada Lovelace, born 1815 in London"
//! ```
//!
//! Without `OPENAI_API_KEY` it says so and exits successfully, sending nothing.

use std::process::ExitCode;

use llm_core::output::{TypedEvent, stream_typed};
use llm_core::{ApiKey, Context, Message, Model, StreamOptions};

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
    let Ok(key) = std::env::var("OPENAI_API_KEY") else {
        println!("skipped: set OPENAI_API_KEY to run this example");
        return ExitCode::SUCCESS;
    };
    let text =
        std::env::args().nth(1).unwrap_or_else(|| "Ada Lovelace, born 1815 in London".to_owned());

    // An empty base URL means the provider's public endpoint.
    let model = Model {
        id: "gpt-4o-mini".to_owned(),
        api: llm_openai_completions::API.to_owned(),
        provider: "openai".to_owned(),
        max_tokens: 1024,
        ..Model::default()
    };
    let provider = llm_openai_completions::OpenAiCompletionsProvider::new();
    let context = Context {
        system_prompt: Some("Extract the person the user describes.".to_owned()),
        messages: vec![Message::user(text)],
        tools: Vec::new(),
    };
    let options = StreamOptions { api_key: Some(ApiKey::new(key)), ..StreamOptions::default() };

    let mut stream = stream_typed::<Person>(&provider, &model, &context, &options);
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
