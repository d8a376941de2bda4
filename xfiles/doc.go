// Package xfiles is the xAgent side of the Connector transfer plane:
// Upload sends a file for an assistant final with POST /files/uploads (M7,
// T1), and Fetch downloads a user's file from a chat.message's
// files[].download_url (M6, T4).
//
// Fetch is careful with what a Connector hands it:
//
//   - download_url must pass imv2.CheckDownloadURL: an absolute http or https
//     URL, or a relative path. file:, data:, ftp:, scheme-relative "//host"
//     and credentials in the URL are refused.
//   - a relative path is joined to the Connector base URL given by the
//     caller (its path prefix kept), never to anything else, and may hold no
//     "." or ".." segment, encoded or not.
//   - redirects are followed only to http and https, at most MaxRedirects.
//   - the body is capped (DefaultMaxBytes unless told): over the cap is
//     ErrTooLarge and no bytes; never a truncated file reported as success.
//   - it dials no special-purpose address (loopback, private, link-local,
//     shared, documentation, benchmarking, reserved, multicast … every
//     range of the IANA special-purpose registries, and the IPv6 forms
//     that embed such an IPv4 address: mapped, NAT64, 6to4) but the
//     Connector's own host. The check is made on the address dialed, after
//     the lookup; a caller's DialContext is kept and handed that address; a
//     transport with DialTLSContext is refused, since it would dial by name.
//   - it uses no proxy, the environment's included: a proxy resolves the
//     name out of the guard's sight. FetchRequest.AllowProxy opts in.
//   - it sends no Authorization header: download URLs carry their own
//     authorization (T3), and the API key stays between xAgent and the
//     Connector's upload endpoint.
//
// Both calls take their timeout from ctx; a ctx without deadline gets
// DefaultTimeout. Errors are marked with imv2.NotPosted or imv2.Refused
// (network failures, 5xx and 429 retryable; bad URLs, 4xx and size
// overruns permanent), so imv2.SafeToRetry tells a caller whether to reject
// a message with retryable=true (A8).
package xfiles
