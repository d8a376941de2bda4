package matrixbridge

import (
	"context"
	"errors"
	"net/url"
	"strings"

	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/protocol"
	"github.com/xagentkit/imv2/state"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/id"
)

// Form is the input of the sign-in flow FlowID.
type Form struct {
	Homeserver  string
	UserID      string
	AccessToken string // secret
	Password    string // secret; used when AccessToken is empty
	Room        string // room ID (!…) or alias (#…)
}

// signInErr is a sign-in refused for a reason the user can fix: the kit
// answers status failed with it. It names the reason only: no token,
// password or homeserver response.
func signInErr(reason string) error { return &connector.SignInError{Reason: reason} }

// ParseForm reads auth.start input into a Form and checks its shape.
func ParseForm(input map[string]string) (Form, error) {
	f := Form{
		Homeserver:  strings.TrimSpace(input[FieldHomeserver]),
		UserID:      strings.TrimSpace(input[FieldUserID]),
		AccessToken: strings.TrimSpace(input[FieldAccessToken]),
		Password:    input[FieldPassword],
		Room:        strings.TrimSpace(input[FieldRoom]),
	}
	u, err := url.Parse(f.Homeserver)
	_, _, uerr := id.UserID(f.UserID).Parse()
	switch {
	case f.Homeserver == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil:
		return Form{}, signInErr("homeserver must be an http or https URL")
	case f.UserID == "":
		return Form{}, signInErr("user_id is required")
	case uerr != nil:
		return Form{}, signInErr("user_id must look like @name:server")
	case f.AccessToken == "" && f.Password == "":
		return Form{}, signInErr("give an access_token or a password")
	case f.Room == "":
		return Form{}, signInErr("room is required")
	case !strings.HasPrefix(f.Room, "!") && !strings.HasPrefix(f.Room, "#"):
		return Form{}, signInErr("room must be a room ID (!…) or an alias (#…)")
	}
	return f, nil
}

// DeviceName is the display name of the device a password sign-in creates.
const DeviceName = "xAgent Connector"

// SignIn checks the account, joins the room and takes the /sync position
// (every message after the sign-in is forwarded, none from before), and
// returns the binding to the room with its Account as Data; it does not
// store it. With an access token it asks /whoami; with a password it logs
// in once, creating a device of its own that SignOut removes again. A
// refused credential or room is a *connector.SignInError; an unreachable
// homeserver another error.
func (br *Bridge) SignIn(ctx context.Context, f Form) (state.Binding, error) {
	acc := Account{Homeserver: f.Homeserver, UserID: f.UserID, AccessToken: f.AccessToken}
	cli := br.client(acc)
	if f.AccessToken != "" {
		who, err := cli.Whoami(ctx)
		if err != nil {
			return state.Binding{}, refused(classify("whoami", err), "the homeserver refused the access token")
		} else if who.UserID.String() != f.UserID {
			return state.Binding{}, signInErr("the access token belongs to another user")
		}
		acc.DeviceID = who.DeviceID.String()
	} else {
		resp, err := cli.Login(ctx, &mautrix.ReqLogin{
			Type:       mautrix.AuthTypePassword,
			Identifier: mautrix.UserIdentifier{Type: mautrix.IdentifierTypeUser, User: f.UserID},
			Password:   f.Password, InitialDeviceDisplayName: DeviceName, StoreCredentials: true,
		})
		if err != nil {
			return state.Binding{}, refused(classify("login", err), "the homeserver refused the user ID or password")
		}
		acc.AccessToken, acc.DeviceID, acc.OwnDevice = resp.AccessToken, resp.DeviceID.String(), true
	}
	undo := func(err error) (state.Binding, error) {
		_ = br.SignOut(context.WithoutCancel(ctx), acc) // do not leave a device behind
		return state.Binding{}, err
	}
	joined, err := cli.JoinRoom(ctx, f.Room, nil)
	if err != nil {
		return undo(refused(classify("join", err), "the account cannot join the room (invite it first, or check the room ID)"))
	}
	resp, err := cli.FullSyncRequest(ctx, mautrix.ReqSync{FilterID: roomFilter(joined.RoomID)})
	if err != nil {
		return undo(classify("sync", err))
	}
	acc.Since = resp.NextBatch
	target := protocol.DescriptorTarget{Provider: Provider, DisplayName: "Matrix room", AccountHint: redactUser(acc.UserID)}
	return state.Binding{Key: joined.RoomID.String(), Target: target, Data: acc.Data()}, nil
}

// SignOut logs out the device the Connector created (OwnDevice); a token
// the user gave is left valid.
func (br *Bridge) SignOut(ctx context.Context, acc Account) error {
	if !acc.OwnDevice {
		return nil
	}
	if _, err := br.client(acc).Logout(ctx); err != nil && !isAuthGone(classify("logout", err)) {
		return classify("logout", err)
	}
	return nil
}

// refused turns a permanent homeserver answer into a SignInError with the
// user-facing reason; transient errors pass through.
func refused(err error, reason string) error {
	var me *matrixError
	if errors.As(err, &me) && me.status >= 400 && me.status < 500 && me.status != 429 {
		return signInErr(reason)
	}
	return err
}
