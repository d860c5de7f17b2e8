//! One adapter per supported site.

mod chatgpt;
mod deepseek;
mod zai;

pub use chatgpt::{ChatGpt, CHATGPT_ORIGIN};
pub use deepseek::DeepSeek;
pub use zai::ZAi;

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}
