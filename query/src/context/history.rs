//! The conversation history as a context table and as prompt text.

use super::tables::{pack_table, Counter, PackedTable};

/// A question and the answers that followed it.
#[derive(Debug, Clone, PartialEq)]
pub struct QaTurn {
    pub user: String,
    pub assistant: Vec<String>,
}

/// Groups (role, content) messages into turns; messages before the first
/// user message (or with other roles) are ignored.
pub fn qa_turns(history: &[(String, String)]) -> Vec<QaTurn> {
    let mut turns: Vec<QaTurn> = Vec::new();
    for (role, content) in history {
        match role.as_str() {
            "user" => turns.push(QaTurn { user: content.clone(), assistant: Vec::new() }),
            "assistant" => {
                if let Some(t) = turns.last_mut() {
                    t.assistant.push(content.clone());
                }
            }
            _ => {}
        }
    }
    turns
}

/// GraphRAG's conversation history table: the last `max_turns` turns, most
/// recent first (recency bias), user questions only when `user_only`, under
/// `max_tokens`.
pub fn history_table(
    history: &[(String, String)],
    max_turns: usize,
    user_only: bool,
    max_tokens: usize,
    count: Counter,
) -> PackedTable {
    let turns = qa_turns(history);
    let mut rows = Vec::new();
    for t in turns.iter().rev().take(max_turns) {
        rows.push(vec!["user".to_string(), t.user.clone()]);
        if !user_only {
            for a in &t.assistant {
                rows.push(vec!["assistant".to_string(), a.clone()]);
            }
        }
    }
    pack_table("Conversation History", &["turn", "content"], rows, max_tokens, count)
}

/// LightRAG's history text: the last `max_turns` turns in order, one
/// `role: content` line per message.
pub fn history_text(history: &[(String, String)], max_turns: usize) -> String {
    let turns = qa_turns(history);
    let start = turns.len().saturating_sub(max_turns);
    let mut out = Vec::new();
    for t in &turns[start..] {
        out.push(format!("user: {}", t.user.trim()));
        for a in &t.assistant {
            out.push(format!("assistant: {}", a.trim()));
        }
    }
    out.join("\n")
}

#[cfg(test)]
mod tests {
    use super::super::tables::testing::{row, words};
    use super::*;

    fn hist() -> Vec<(String, String)> {
        [("user", "q1"), ("assistant", "a1"), ("user", "q2"), ("assistant", "a2"), ("user", "q3")]
            .iter()
            .map(|(r, c)| (r.to_string(), c.to_string()))
            .collect()
    }

    #[test]
    fn history_table_is_recent_first_and_limited() {
        let t = history_table(&hist(), 2, true, 1000, &words);
        assert_eq!(t.text, "-----Conversation History-----\nturn|content\nuser|q3\nuser|q2");
        let t = history_table(&hist(), 5, false, 1000, &words);
        assert_eq!(t.rows.len(), 5);
        assert_eq!(t.rows[1], row(&["user", "q2"]));
        assert_eq!(t.rows[2], row(&["assistant", "a2"]));
        assert!(history_table(&[], 5, true, 1000, &words).text.is_empty());
    }

    #[test]
    fn history_text_keeps_order() {
        assert_eq!(history_text(&hist(), 2), "user: q2\nassistant: a2\nuser: q3");
        assert_eq!(history_text(&[], 2), "");
    }
}
