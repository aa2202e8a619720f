//! Finishing items: `output_item.done`, cumulative snapshots, wrapped parallel calls, and the
//! output `response.completed` repeats.

use super::*;

impl Decoder {
    /// `response.output_item.done`: a message whose text streamed is finished from its id, type
    /// and phase alone (the repeated text is skipped, never decoded), a function call from its
    /// id, call id and name, its arguments left to [`handle`](Self::handle) to decode in place
    /// ([`Deferred::CallDone`]); any other item is decoded whole.
    pub(super) fn output_item_done(
        &mut self,
        event: &WireEvent<'_>,
        raw: &RawValue,
        data: &str,
        out: &mut Vec<Delta>,
    ) -> Option<Deferred> {
        let Ok(head) = serde_json::from_str::<ItemHead<'_>>(raw.get()) else {
            // Loosely typed head fields: decoded whole.
            let mut item = self.whole_item(raw, out)?;
            let key = self.key_for_item(event, str_of(item.get("id")));
            self.item_done(key, &mut item, out);
            return None;
        };
        let key = self.key_for_item(event, head.id.as_deref());
        let streamed_message = head.kind.as_deref() == Some("message")
            && self.items.get(&key).is_some_and(|state| state.streamed && !state.done);
        let mut item = if streamed_message {
            let mut item = serde_json::Map::new();
            item.insert("type".to_owned(), Value::from("message"));
            if let Some(id) = head.id {
                item.insert("id".to_owned(), Value::from(id.into_owned()));
            }
            if let Some(phase) = head.phase {
                item.insert("phase".to_owned(), phase);
            }
            Value::Object(item)
        } else if head.kind.as_deref() == Some("function_call") {
            let mut item = serde_json::Map::new();
            item.insert("type".to_owned(), Value::from("function_call"));
            let fields = [("id", head.id), ("call_id", head.call_id), ("name", head.name)];
            for (field, value) in fields {
                if let Some(value) = value {
                    item.insert(field.to_owned(), Value::from(value.into_owned()));
                }
            }
            let item = Value::Object(item);
            if let Some(literal) = head.arguments.and_then(|raw| Literal::of(raw, data)) {
                return Some(Deferred::CallDone { key, item, literal });
            }
            item
        } else {
            self.whole_item(raw, out)?
        };
        self.item_done(key, &mut item, out);
        None
    }

    /// A finished item decoded whole; one that is valid JSON but no `Value` (a lone surrogate
    /// escape) ends the stream with a decode error, as when the whole event was parsed at once.
    pub(super) fn whole_item(&mut self, raw: &RawValue, out: &mut Vec<Delta>) -> Option<Value> {
        match serde_json::from_str(raw.get()) {
            Ok(item) => Some(item),
            Err(e) => {
                let error =
                    Error::new(ErrorKind::Decode, PROVIDER, format!("Invalid event JSON: {e}"))
                        .with_body(raw.get());
                self.fail(out, error);
                None
            }
        }
    }

    /// Finishes the item at `key`; a call's arguments are taken out of `item` (not copied).
    pub(super) fn item_done(&mut self, key: BlockKey, item: &mut Value, out: &mut Vec<Delta>) {
        let item_id = str_of(item.get("id")).map(str::to_owned);
        let state =
            self.items.entry(key).or_insert_with(|| Item::new(Kind::Other, item_id.clone()));
        if state.done && state.item_id == item_id {
            return;
        }
        if state.opened && state.done {
            // A finished block at this index belonged to another item; start afresh.
            *state = Item::new(Kind::Other, item_id.clone());
        }
        if let Some(id) = &item_id {
            self.by_item_id.entry(id.clone()).or_insert(key);
        }
        if str_of(item.get("type")) != Some("message") {
            self.flush_held(out);
        }
        match str_of(item.get("type")) {
            Some("message") => self.message_done(key, item, out),
            Some("reasoning") => self.reasoning_done(key, item, out),
            Some("function_call") => {
                let arguments = match item.get_mut("arguments").map(Value::take) {
                    Some(Value::String(arguments)) => arguments,
                    _ => String::new(),
                };
                self.call_done(key, item, arguments, out)
            }
            _ => self.opaque_done(key, item, out),
        }
        if let Some(state) = self.items.get_mut(&key) {
            state.done = true;
            state.done_type = str_of(item.get("type")).map(str::to_owned);
            state.item_id = item_id;
        }
    }

    /// Any other item: kept whole, for display and same-model replay, never executed.
    pub(super) fn opaque_done(&mut self, key: BlockKey, item: &Value, out: &mut Vec<Delta>) {
        if !item.is_object() {
            return;
        }
        let wire_type = str_of(item.get("type")).unwrap_or_default().to_owned();
        let waits_for_client = str_of(item.get("call_id")).is_some_and(|id| !id.is_empty())
            || wire_type == "mcp_approval_request";
        if waits_for_client {
            self.unanswerable.push(wire_type.clone());
        }
        out.push(Delta::ProviderContent {
            key,
            content: ProviderContent { wire_type, data: item.clone() },
        });
    }

    pub(super) fn message_done(&mut self, key: BlockKey, item: &Value, out: &mut Vec<Delta>) {
        let phase = str_of(item.get("phase")).map(str::to_owned);
        if let Some(snapshot) = self.snapshot.take_if(|s| s.key == key) {
            self.snapshot_done(snapshot, item, phase, out);
            return;
        }
        let Some(state) = self.items.get_mut(&key) else { return };
        if !state.streamed {
            let text = message_text(item);
            if !text.is_empty() {
                if let Some(held) = self.held.take() {
                    out.push(Delta::BlockEnd { key: held.key });
                }
                state.keep_text(&text);
                out.push(Delta::Text { key, text });
                state.streamed = true;
                state.opened = true;
            }
        }
        if !state.opened {
            return;
        }
        text_signature(key, item, out);
        let text = state.text.take();
        self.flush_held(out);
        match text {
            // Its end waits: the next item may be a cumulative snapshot of it.
            Some(text) => self.held = Some(Held { key, text: Some(text), phase }),
            None => out.push(Delta::BlockEnd { key }),
        }
    }

    /// The snapshot candidate finished: a strict extension of the held text continues
    /// that block (its text grown, the signature this item's); anything else is its own block.
    pub(super) fn snapshot_done(
        &mut self,
        snapshot: Snapshot,
        item: &Value,
        phase: Option<String>,
        out: &mut Vec<Delta>,
    ) {
        let Some(held) = self.held.as_mut() else { return };
        let base = held.text.as_deref().unwrap_or_default();
        let mut extends = snapshot.extending;
        if !extends && snapshot.text.is_empty() {
            // Nothing streamed: the `.done` text decides.
            let text = message_text(item);
            if text.len() > base.len() && text.starts_with(base) {
                let suffix = text.get(base.len()..).unwrap_or_default().to_owned();
                out.push(Delta::Text { key: held.key, text: suffix });
                held.text = (text.len() <= SNAPSHOT_BASE_LIMIT).then_some(text);
                extends = true;
            } else {
                self.snapshot = Some(Snapshot { text, ..snapshot });
                return self.snapshot_diverged(item, phase, out);
            }
        }
        if extends {
            let key = held.key;
            text_signature(key, item, out);
            held.phase = phase;
            if held.text.is_none() {
                self.held = None;
                out.push(Delta::BlockEnd { key });
            }
            return;
        }
        self.snapshot = Some(snapshot);
        self.snapshot_diverged(item, phase, out);
    }

    /// The finished snapshot candidate (in `self.snapshot`) is no strict extension: the
    /// held block ends and the candidate is a block of its own (held in turn).
    pub(super) fn snapshot_diverged(
        &mut self,
        item: &Value,
        phase: Option<String>,
        out: &mut Vec<Delta>,
    ) {
        let Some(key) = self.snapshot.as_ref().map(|s| s.key) else { return };
        let opened = self.snapshot.as_ref().is_some_and(|s| !s.text.is_empty());
        // Ends the held block and writes the kept-back text as the candidate's own block.
        self.flush_held(out);
        let Some(state) = self.items.get_mut(&key) else { return };
        if !opened {
            return;
        }
        state.opened = true;
        state.streamed = true;
        text_signature(key, item, out);
        match state.text.take() {
            Some(text) => self.held = Some(Held { key, text: Some(text), phase }),
            None => out.push(Delta::BlockEnd { key }),
        }
    }

    pub(super) fn reasoning_done(&mut self, key: BlockKey, item: &Value, out: &mut Vec<Delta>) {
        let Some(state) = self.items.get_mut(&key) else { return };
        if !state.streamed {
            let text = reasoning_text(item);
            if !text.is_empty() {
                out.push(Delta::Thinking { key, text });
                state.streamed = true;
            }
        }
        state.opened = true;
        // The whole item (with the `.done` encrypted_content) is the replay signature.
        out.push(Delta::ThinkingSignature { key, signature: item.to_string() });
        out.push(Delta::BlockEnd { key });
    }

    pub(super) fn call_done(
        &mut self,
        key: BlockKey,
        item: &Value,
        arguments: String,
        out: &mut Vec<Delta>,
    ) {
        let name = str_of(item.get("name")).unwrap_or_default().to_owned();
        let wrapper_name = self.is_wrapper(&name);
        // The name is known here even for a call whose `added` never came.
        let plan = self.strict_plans.get(&name).cloned();
        let Some(state) = self.items.get_mut(&key) else { return };
        if state.wrapper.is_some() || (!state.opened && wrapper_name) {
            let buffer = state.wrapper.take().unwrap_or_default();
            let text = if arguments.len() >= buffer.len() { arguments } else { buffer };
            state.opened = true;
            self.expand_wrapper(key, item, &name, &text, out);
            return;
        }
        if state.opened {
            out.push(Delta::ToolCallMeta {
                key,
                id: Some(call_id(item)),
                name: Some(name),
                thought_signature: None,
            });
        } else {
            // `output_item.done` without `added` (OpenClaw drops this call; we keep it).
            state.opened = true;
            state.kind = Kind::FunctionCall;
            self.tool_calls += 1;
            out.push(Delta::ToolCallStart { key, id: call_id(item), name, arguments: None });
        }
        if !arguments.is_empty() {
            let arguments = match plan {
                Some(plan) => NullFilter::new(plan).push(&arguments),
                None => arguments,
            };
            out.push(Delta::ToolCallArgsDone { key, arguments });
        }
        out.push(Delta::BlockEnd { key });
    }

    /// Expands `multi_tool_use.parallel` (`{"tool_uses":[{"recipient_name":"functions.x",
    /// "parameters":{...}}]}`) into one call per entry; anything else stays one call.
    pub(super) fn expand_wrapper(
        &mut self,
        key: BlockKey,
        item: &Value,
        name: &str,
        arguments: &str,
        out: &mut Vec<Delta>,
    ) {
        let base = call_id(item);
        let base = base.split('|').next().unwrap_or_default().to_owned();
        let uses = serde_json::from_str::<Value>(arguments)
            .ok()
            .and_then(|v| v.get("tool_uses").and_then(Value::as_array).cloned())
            .filter(|uses| {
                !uses.is_empty()
                    && uses
                        .iter()
                        .all(|u| str_of(u.get("recipient_name")).is_some_and(|n| !n.is_empty()))
            });
        let Some(uses) = uses else {
            self.tool_calls += 1;
            out.push(Delta::ToolCallStart {
                key,
                id: call_id(item),
                name: name.to_owned(),
                arguments: None,
            });
            out.push(Delta::ToolCallArgs { key, fragment: arguments.to_owned() });
            out.push(Delta::BlockEnd { key });
            return;
        };
        for (n, entry) in uses.iter().enumerate() {
            let recipient = str_of(entry.get("recipient_name")).unwrap_or_default();
            let tool = recipient.strip_prefix("functions.").unwrap_or(recipient);
            let mut parameters = entry.get("parameters").filter(|p| p.is_object()).cloned();
            if let (Some(plan), Some(parameters)) = (self.strict_plans.get(tool), &mut parameters) {
                plan.restore(parameters);
            }
            let wrapper_key = self.next_wrapper;
            self.next_wrapper += 1;
            self.tool_calls += 1;
            out.push(Delta::ToolCallStart {
                key: wrapper_key,
                id: format!("{base}_{n}"),
                name: tool.to_owned(),
                arguments: Some(parameters.unwrap_or_else(|| Value::Object(Default::default()))),
            });
            out.push(Delta::BlockEnd { key: wrapper_key });
        }
    }

    /// Processes items of `response.output` that never came as `output_item.done`.
    ///
    /// An item is found by its id, else by its position (its `output_index`): servers
    /// that rotate item ids send ids here that no event carried.
    ///
    /// An item is decoded only when it is not finished already: one that finished (with
    /// `output_item.done`) is recognised from its head fields and skipped, so its text or
    /// arguments are not decoded a third time. Returns `false` when an item that must be
    /// read does not decode (the stream then ended with that error).
    pub(super) fn reconcile_output(&mut self, output: &[&RawValue], out: &mut Vec<Delta>) -> bool {
        for (index, raw) in output.iter().enumerate() {
            let head = serde_json::from_str::<ItemHead<'_>>(raw.get());
            let decoded = match head {
                Ok(_) => None,
                // Loosely typed head fields: decoded whole.
                Err(_) => match self.whole_item(raw, out) {
                    Some(item) => Some(item),
                    None => return false,
                },
            };
            let (id, wire_type) = match (&head, &decoded) {
                (Ok(head), _) => (head.id.as_deref(), head.kind.as_deref()),
                (Err(_), item) => {
                    let item = item.as_ref();
                    (
                        str_of(item.and_then(|i| i.get("id"))),
                        str_of(item.and_then(|i| i.get("type"))),
                    )
                }
            };
            let key = match id.and_then(|id| self.by_item_id.get(id)) {
                Some(key) => *key,
                None => match self.items.get(&(index as BlockKey)) {
                    // The same position finished as another kind of item: a different one.
                    Some(state) if state.done && state.done_type.as_deref() != wire_type => {
                        self.synthetic_key()
                    }
                    _ => index as BlockKey,
                },
            };
            if self.items.get(&key).is_some_and(|s| s.done) {
                continue;
            }
            let item = match decoded {
                Some(item) => Some(item),
                None => self.whole_item(raw, out),
            };
            let Some(mut item) = item else { return false };
            self.item_done(key, &mut item, out);
        }
        true
    }

    pub(super) fn complete(&mut self, kind: &str, parts: &ResponseParts<'_>, out: &mut Vec<Delta>) {
        if !self.reconcile_output(&parts.output, out) {
            return;
        }
        self.flush_held(out);
        let response = &parts.fields;
        out.push(metadata(response));
        if let Some(usage) = response.get("usage").and_then(usage) {
            out.push(Delta::Usage(usage));
        }
        if !self.refusal.is_empty() {
            let message = format!("OpenAI refusal: {}", self.refusal);
            let error = Error::new(ErrorKind::Refused, PROVIDER, message)
                .with_code("refusal")
                .with_retryable(false);
            self.fail(out, error);
            return;
        }
        let status = str_of(response.get("status")).unwrap_or(match kind {
            "response.incomplete" => "incomplete",
            _ => "completed",
        });
        let reason = match status {
            "incomplete" => {
                let why = str_of(response.get("incomplete_details").and_then(|d| d.get("reason")));
                if why == Some("content_filter") {
                    self.fail(
                        out,
                        Error::new(ErrorKind::Refused, PROVIDER, "incomplete: content_filter")
                            .with_code("content_filter")
                            .with_retryable(false),
                    );
                    return;
                }
                StopReason::Length
            }
            "failed" | "cancelled" => {
                // The body is the whole response, output included (decoded on this rare path).
                let body = serde_json::from_str::<Value>(parts.raw)
                    .map_or_else(|_| parts.raw.to_owned(), |whole| whole.to_string());
                let error = failure(response, &body);
                self.fail(out, error);
                return;
            }
            _ if self.tool_calls > 0 => StopReason::ToolUse,
            _ => StopReason::Stop,
        };
        if let Some(first) = self.unanswerable.first() {
            let error = Error::new(
                ErrorKind::Unsupported,
                PROVIDER,
                format!(
                    "The model requested an item of type {first}, which clawcall cannot \
                     answer (only function tools are supported)"
                ),
            )
            .with_code(first.clone())
            .with_retryable(false);
            self.fail(out, error);
            return;
        }
        self.finished = true;
        out.push(Delta::Stop(reason));
        out.push(Delta::Done);
    }
}
