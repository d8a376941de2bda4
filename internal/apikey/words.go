package apikey

// commonWords are the words a person choosing a key reaches for first:
// the commonest passwords' words, keyboard rows, and common English words
// of four letters or more. Bits costs a match one choice among them.
var commonWords = []string{
	// passwords and their parts
	"password", "passwd", "pass", "secret", "admin", "administrator", "root", "login", "letmein", "welcome",
	"qwerty", "qwertyuiop", "asdf", "asdfgh", "asdfghjkl", "zxcv", "zxcvbn", "zxcvbnm", "azerty", "qwertz",
	"iloveyou", "love", "trustno", "dragon", "monkey", "master", "shadow", "sunshine", "princess", "football",
	"baseball", "soccer", "hockey", "superman", "batman", "starwars", "pokemon", "michael", "jordan", "charlie",
	"freedom", "whatever", "hello", "hunter", "ranger", "buster", "tigger", "ginger", "pepper", "cheese",
	"summer", "winter", "spring", "autumn", "flower", "orange", "banana", "apple", "chocolate", "cookie",
	"default", "changeme", "change", "test", "testing", "demo", "example", "sample", "token", "apikey",
	"access", "private", "public", "server", "keys", "bearer", "user", "guest", "system", "database",
	"company", "office",
	// common English words
	"about", "after", "again", "all", "also", "always", "another", "any", "away", "back",
	"battery", "because", "been", "before", "being", "best", "better", "between", "big", "black",
	"blue", "book", "both", "brown", "call", "came", "can", "car", "cat", "city",
	"come", "correct", "could", "country", "day", "does", "dog", "done", "door", "down",
	"each", "earth", "end", "even", "every", "eye", "face", "family", "fast", "father",
	"find", "fire", "first", "fish", "five", "food", "four", "fox", "friend", "from",
	"game", "gave", "girl", "give", "going", "gold", "good", "great", "green", "group",
	"hand", "happy", "hard", "have", "head", "heart", "help", "here", "high", "home",
	"horse", "house", "into", "just", "jump", "jumps", "keep", "kind", "king", "know",
	"land", "large", "last", "lazy", "life", "light", "like", "line", "little", "live",
	"long", "look", "made", "magic", "make", "many", "money", "moon", "more", "most",
	"mother", "much", "music", "must", "name", "never", "new", "next", "night", "number",
	"only", "open", "other", "over", "own", "paper", "part", "people", "place", "play",
	"point", "power", "purple", "quick", "read", "real", "right", "river", "road", "rock",
	"same", "school", "search", "second", "should", "silver", "small", "some", "sound", "star",
	"staple", "still", "stone", "story", "strong", "such", "sure", "take", "than", "that",
	"their", "them", "then", "there", "these", "they", "thing", "think", "this", "those",
	"three", "through", "time", "today", "together", "tree", "true", "under", "until", "very",
	"want", "water", "well", "were", "what", "when", "where", "which", "while", "white",
	"with", "word", "work", "world", "would", "write", "year", "yellow", "young", "your",
}
