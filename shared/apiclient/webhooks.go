package apiclient

import (
	"context"
	"net/http"

	"github.com/olivares-dev/olivares/shared/apitypes"
)

// CreateWebhook is POST /webhooks (R-NOTIF-1); the answer holds the secret.
func (c *Client) CreateWebhook(ctx context.Context, req apitypes.WebhookCreate) (apitypes.Webhook, error) {
	var w apitypes.Webhook
	return w, c.call(ctx, http.MethodPost, Base+"/webhooks", req, &w)
}

// Webhooks is GET /webhooks.
func (c *Client) Webhooks(ctx context.Context) (apitypes.WebhookList, error) {
	var l apitypes.WebhookList
	return l, c.get(ctx, Base+"/webhooks", nil, &l)
}

// DeleteWebhook is DELETE /webhooks/{id}.
func (c *Client) DeleteWebhook(ctx context.Context, id string) error {
	return c.call(ctx, http.MethodDelete, Base+"/webhooks/"+esc(id), nil, nil)
}

// WebhookDeliveries is GET /webhooks/{id}/deliveries.
func (c *Client) WebhookDeliveries(ctx context.Context, id string) (apitypes.WebhookDeliveryList, error) {
	var l apitypes.WebhookDeliveryList
	return l, c.get(ctx, Base+"/webhooks/"+esc(id)+"/deliveries", nil, &l)
}

// TestWebhook is POST /webhooks/{id}/test (R-NOTIF-6).
func (c *Client) TestWebhook(ctx context.Context, id string) (apitypes.WebhookDelivery, error) {
	var d apitypes.WebhookDelivery
	return d, c.call(ctx, http.MethodPost, Base+"/webhooks/"+esc(id)+"/test", nil, &d)
}

// PushKey is GET /push/key (R-NOTIF-8).
func (c *Client) PushKey(ctx context.Context) (apitypes.PushKey, error) {
	var k apitypes.PushKey
	return k, c.get(ctx, Base+"/push/key", nil, &k)
}

// SubscribePush is POST /push/subscriptions.
func (c *Client) SubscribePush(ctx context.Context, req apitypes.PushSubscriptionCreate) (apitypes.PushSubscription, error) {
	var s apitypes.PushSubscription
	return s, c.call(ctx, http.MethodPost, Base+"/push/subscriptions", req, &s)
}

// PushSubscriptions is GET /push/subscriptions: the caller's own.
func (c *Client) PushSubscriptions(ctx context.Context) (apitypes.PushSubscriptionList, error) {
	var l apitypes.PushSubscriptionList
	return l, c.get(ctx, Base+"/push/subscriptions", nil, &l)
}

// UnsubscribePush is DELETE /push/subscriptions/{id}.
func (c *Client) UnsubscribePush(ctx context.Context, id string) error {
	return c.call(ctx, http.MethodDelete, Base+"/push/subscriptions/"+esc(id), nil, nil)
}

// TestPush is POST /push/subscriptions/{id}/test.
func (c *Client) TestPush(ctx context.Context, id string) (apitypes.WebhookDelivery, error) {
	var d apitypes.WebhookDelivery
	return d, c.call(ctx, http.MethodPost, Base+"/push/subscriptions/"+esc(id)+"/test", nil, &d)
}
