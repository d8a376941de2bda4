// Package metrics is a Prometheus collector over the SDK's Observer events
// and its stores, in a module of its own so that the SDK does not import
// the Prometheus client. A kit Connector (package connector) serves these
// series and more at /metrics by default without it; this module is for
// a Channel, dataplane Server or Client of your own, or for a Connector
// whose metrics go to a client_golang registry (Advanced.Metrics set to
// Handler, Advanced.Channel.Observer to the Collector).
//
//	m := metrics.New()
//	opts := &imv2.Options{
//		Observer:  m,
//		Pending:   m.Pending(st.Pending()),
//		Completed: m.Completed(st.Completed()),
//	}
//	http.Handle("/metrics", m.Handler())
//
// One Collector serves every Channel of a process: pass it as the Observer
// of each (or of a dataplane Server or Client, which hands its Options to
// every Channel).
//
// # Metrics
//
//	name                                  type       labels        what
//	imv2_events_total                     counter    kind          every Observer event, by imv2.EventKind name
//	imv2_messages_sent_total              counter    -             outbound messages transmitted for the first time
//	imv2_resends_total                    counter    -             transmissions after the first (S2)
//	imv2_pending_messages                 gauge      -             outbound messages transmitted and not yet acked or failed
//	imv2_acks_received_total              counter    status, code  terminal outcomes of outbound messages: accepted and
//	                                                               duplicate acks, and failures by code (a rejected ack's,
//	                                                               or expired, closed, …)
//	imv2_acks_sent_total                  counter    status, code  acks this process answered inbound messages with
//	imv2_deltas_rejected_total            counter    code          deltas rejected with an error packet (D12)
//	imv2_target_call_duration_seconds     histogram  outcome       PostMessage calls of the Target: ok, or error (the call failed)
//	imv2_store_errors_total               counter    store, op     errors of the wrapped pending and completed stores
//
// status is accepted, duplicate or rejected; a code label is empty for
// accepted and duplicate. Codes come from the peer, so the label is
// bounded: the SDK's own codes, then up to MaxExtraCodes others in the
// order first seen, then "other". A failed outbound message carries status
// "rejected" and its code. imv2_pending_messages counts what this process
// transmitted: messages still waiting for the send window are not in it
// (the kit's own imv2_pending_messages counts them), and a Channel.Drop
// of sent messages leaves them counted.
package metrics
