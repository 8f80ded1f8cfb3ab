//! Global search: the key points of map answers, and the reduce context.

use serde_json::Value;

use super::rankings::cmp_desc_f64;
use super::tables::Counter;

/// One key point of a map answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    /// 1-based batch number (GraphRAG's analyst).
    pub analyst: usize,
    pub description: String,
    pub score: f64,
}

fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// The points of a map answer (`{"points": [{"description", "score"}]}`);
/// `None` when the answer has no `points` list. Points without a description
/// are skipped; a missing or unreadable score counts as 0.
pub fn parse_points(answer: &Value, analyst: usize) -> Option<Vec<Point>> {
    let list = answer.get("points")?.as_array()?;
    Some(
        list.iter()
            .filter_map(|p| {
                let description = p.get("description").or_else(|| p.get("answer"))?.as_str()?.trim().to_string();
                if description.is_empty() {
                    return None;
                }
                let score = p.get("score").and_then(number).unwrap_or(0.0);
                Some(Point { analyst, description, score })
            })
            .collect(),
    )
}

fn score_text(s: f64) -> String {
    if s.fract() == 0.0 && s.abs() < 1e15 {
        format!("{}", s as i64)
    } else {
        format!("{s}")
    }
}

/// GraphRAG's reduce context: points with a score above 0, best first (ties
/// keep their order), each as `----Analyst N----\nImportance Score: S\ntext`,
/// added while they fit in `max_tokens`. Returns the text and the points used.
pub fn pack_points(mut points: Vec<Point>, max_tokens: usize, count: Counter) -> (String, Vec<Point>) {
    points.retain(|p| p.score > 0.0);
    points.sort_by(|a, b| cmp_desc_f64(a.score, b.score));
    let mut parts: Vec<String> = Vec::new();
    let mut used = Vec::new();
    let mut tokens = 0;
    for p in points {
        let text =
            format!("----Analyst {}----\nImportance Score: {}\n{}", p.analyst, score_text(p.score), p.description);
        let t = count(&text);
        if tokens + t > max_tokens {
            break;
        }
        tokens += t;
        parts.push(text);
        used.push(p);
    }
    (parts.join("\n\n"), used)
}

#[cfg(test)]
mod tests {
    use super::super::tables::testing::words;
    use super::*;

    #[test]
    fn points_are_parsed_filtered_sorted_and_packed() {
        let v = serde_json::json!({"points": [
            {"description": "low", "score": 10},
            {"description": "zero", "score": 0},
            {"description": "high", "score": "90"},
            {"description": "", "score": 50},
            {"description": "no score"}
        ]});
        let p = parse_points(&v, 2).unwrap();
        assert_eq!(p.len(), 4);
        assert!(parse_points(&serde_json::json!({"answer": "x"}), 1).is_none());
        let mut all = p;
        all.push(Point { analyst: 1, description: "mid".into(), score: 50.5 });
        let (text, used) = pack_points(all.clone(), 1000, &words);
        assert_eq!(used.iter().map(|p| p.description.as_str()).collect::<Vec<_>>(), ["high", "mid", "low"]);
        assert!(text.starts_with(
            "----Analyst 2----\nImportance Score: 90\nhigh\n\n----Analyst 1----\nImportance Score: 50.5\nmid"
        ));
        let (_, used) = pack_points(all, 8, &words);
        assert_eq!(used.len(), 1);
        let (text, used) = pack_points(vec![Point { analyst: 1, description: "x".into(), score: 0.0 }], 100, &words);
        assert!(text.is_empty() && used.is_empty());
    }
}
