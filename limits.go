package imv2

// Hard bounds every decoder of this package enforces. They bound the memory
// one packet can pin, independent of the frame limit of the transport.
const (
	// MaxIDBytes bounds message_id, file_ref and packet IDs used as map keys.
	MaxIDBytes = 256
	// MaxTextBytes bounds the text of one chat.message and the assembled
	// text of one delta stream (D9).
	MaxTextBytes = 1 << 20
	// MaxFilesPerMessage bounds files[] of one chat.message.
	MaxFilesPerMessage = 32
	// MaxFilenameChars bounds files[].filename in characters (Unicode code
	// points, as the schema's maxLength counts them): 255, so a name of 255
	// characters in any script fits, and one is at most 1,020 bytes.
	MaxFilenameChars = 255
	// maxToolNameBytes bounds chat.activity tool_name (C3).
	maxToolNameBytes = 256
	// maxAckMessageBytes bounds the short human message of a rejected ack.
	maxAckMessageBytes = 1024
)
