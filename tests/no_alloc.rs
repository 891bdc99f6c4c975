//! A decision on an already built policy allocates nothing (the hot path of every
//! proxied request). Counted with a global allocator wrapper, in a test binary of
//! its own so that no other test's allocations are counted.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use robots_proxy::robots::{BotProfile, RobotsTxt};

struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn decisions_allocate_nothing() {
    let robots = RobotsTxt::parse(include_bytes!("../benches/data/robots-50-rules.txt"));
    let policy = robots.policy(&BotProfile::new("FooBot").with_virtual_agent("indexer"));
    let paths: Vec<String> = include_str!("../benches/data/urls-1000.txt")
        .lines()
        .map(|u| {
            u.splitn(4, '/')
                .nth(3)
                .map_or("/".to_string(), |p| format!("/{p}"))
        })
        // Targets that need percent-normalising take the stack-buffer path.
        .chain(["/%70rivate/ü?x=*$".to_string(), "/a b".to_string()])
        .collect();

    let before = ALLOCATIONS.load(Ordering::Relaxed);
    let mut allowed = 0;
    for path in &paths {
        let decision = policy.decide(path);
        allowed += usize::from(decision.allowed());
        // Explaining is on demand and borrows too.
        std::hint::black_box(policy.explain(&decision));
    }
    let after = ALLOCATIONS.load(Ordering::Relaxed);

    assert_eq!(after - before, 0, "decisions allocated");
    // The loop did decide: both verdicts occur in this input.
    assert!(
        allowed > 0 && allowed < paths.len(),
        "allowed {allowed} of {}",
        paths.len()
    );
}
