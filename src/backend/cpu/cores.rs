//! How many threads the CPU backend uses by default: one per physical core
//! of those this process may run on, as llama.cpp chooses. Two hardware
//! threads of one core share its vector units, which the dot loops keep busy.

/// CPUs this process may use (affinity and cgroup quotas counted) divided
/// by the hardware threads per core; at least one.
pub fn default_threads() -> usize {
    let logical = std::thread::available_parallelism().map_or(1, |n| n.get());
    (logical / threads_per_core()).max(1)
}

/// Hardware threads per core, from Linux's topology files (the first
/// CPU's siblings); 1 elsewhere or when they cannot be read.
fn threads_per_core() -> usize {
    #[cfg(target_os = "linux")]
    if let Ok(list) =
        std::fs::read_to_string("/sys/devices/system/cpu/cpu0/topology/thread_siblings_list")
    {
        return cpu_list_len(list.trim()).max(1);
    }
    1
}

/// Number of CPUs in a Linux CPU list such as `0-1,8-9`; entries that do
/// not parse count for nothing.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
fn cpu_list_len(list: &str) -> usize {
    list.split(',')
        .filter_map(|range| match range.split_once('-') {
            Some((first, last)) => {
                let (first, last) = (first.parse::<usize>().ok()?, last.parse::<usize>().ok()?);
                last.checked_sub(first).map(|n| n + 1)
            }
            None => range.parse::<usize>().ok().map(|_| 1),
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_are_counted() {
        assert_eq!(cpu_list_len("0"), 1);
        assert_eq!(cpu_list_len("0-1"), 2);
        assert_eq!(cpu_list_len("0,32"), 2);
        assert_eq!(cpu_list_len("0-1,8-9"), 4);
        assert_eq!(cpu_list_len("3-1,x,"), 0);
        assert!(default_threads() >= 1);
    }
}
