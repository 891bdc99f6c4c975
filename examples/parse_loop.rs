//! One engine's "parse + select FooBot's groups" on the 50-rule benchmark file,
//! `count` times: the program `benches/instructions.sh` counts instructions in.
//!
//!     cargo run --release --example parse_loop -- ours|robotxt|texting COUNT

use std::hint::black_box;

use robots_proxy::robots::{BotProfile, RobotsTxt};

const ROBOTS: &[u8] = include_bytes!("../benches/data/robots-50-rules.txt");
const AGENT: &str = "FooBot";

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (engine, count) = match args.as_slice() {
        [engine, count] => match count.parse::<u32>() {
            Ok(count) => (engine.as_str(), count),
            Err(_) => usage(),
        },
        _ => usage(),
    };
    let bot = BotProfile::new(AGENT);
    match engine {
        "ours" => (0..count).for_each(|_| {
            black_box(RobotsTxt::parse(black_box(ROBOTS)).policy(&bot));
        }),
        "robotxt" => (0..count).for_each(|_| {
            let _ = black_box(robotxt::Robots::parse(black_box(ROBOTS), AGENT));
        }),
        "texting" => (0..count).for_each(|_| {
            black_box(texting_robots::Robot::new(AGENT, black_box(ROBOTS)).ok());
        }),
        _ => usage(),
    }
}

fn usage() -> ! {
    eprintln!("usage: parse_loop ours|robotxt|texting COUNT");
    std::process::exit(2)
}
