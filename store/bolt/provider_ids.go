package bolt

import (
	"bytes"
	"context"

	"go.etcd.io/bbolt"

	"github.com/cool-ai/beachd/store"
)

func providerKey(channel, pid string) []byte { return []byte(channel + "\x00" + pid) }

func deliveryPIDKey(id, pid string) []byte { return []byte(id + "\x00" + pid) }

// putProviderIDTx makes pid find d, and lists it under d so that pruning d
// removes the entry (deleteProviderIDsTx). An id a provider reuses (an SMTP
// queue id) finds its latest delivery.
func putProviderIDTx(tx *bbolt.Tx, d *store.Delivery, pid string) error {
	if err := tx.Bucket(bProviderIDs).Put(providerKey(d.Channel, pid), []byte(d.ID)); err != nil {
		return err
	}
	return tx.Bucket(bDeliveryPIDs).Put(deliveryPIDKey(d.ID, pid), nil)
}

// deleteProviderIDsTx removes every provider id listed under d, and its
// entry unless a later delivery has taken the id over.
func deleteProviderIDsTx(tx *bbolt.Tx, d *store.Delivery) error {
	pids := tx.Bucket(bProviderIDs)
	prefix := deliveryPIDKey(d.ID, "")
	c := tx.Bucket(bDeliveryPIDs).Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Seek(prefix) {
		pk := providerKey(d.Channel, string(k[len(prefix):]))
		if bytes.Equal(pids.Get(pk), []byte(d.ID)) {
			if err := pids.Delete(pk); err != nil {
				return err
			}
		}
		if err := c.Delete(); err != nil {
			return err
		}
	}
	return nil
}

// DeliveryByProviderID finds the delivery that a provider id belongs to: the
// id of any of its attempts or message parts, until the delivery is pruned
// (a status callback about an earlier attempt's message may come late).
func (s *DB) DeliveryByProviderID(ctx context.Context, channel, pid string) (*store.Delivery, error) {
	var d store.Delivery
	err := s.bolt.View(func(tx *bbolt.Tx) error {
		id := tx.Bucket(bProviderIDs).Get(providerKey(channel, pid))
		if id == nil {
			return store.ErrNotFound
		}
		if err := getDelivery(tx.Bucket(bDeliveries), id, &d); err != nil {
			return err
		}
		overlayLease(tx, &d)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &d, nil
}

// SetProviderStatus records a status the provider reported after sending
// (Twilio status callbacks). It does not change the delivery's state.
func (s *DB) SetProviderStatus(ctx context.Context, id, status, detail string) (*store.Delivery, error) {
	d, _, err := s.UpdateProviderStatus(ctx, id, func(*store.Delivery) (string, string, bool) { return status, detail, true })
	return d, err
}

// UpdateProviderStatus is SetProviderStatus decided inside the write
// transaction: decide sees the stored delivery and returns the status and
// detail to record, or ok false to leave it. Two callbacks about one
// delivery (the parts of a long SMS) then cannot both read the old status
// and the later overwrite the earlier's verdict. decide may be called more
// than once and must not have side effects.
func (s *DB) UpdateProviderStatus(ctx context.Context, id string, decide func(d *store.Delivery) (status, detail string, ok bool)) (*store.Delivery, bool, error) {
	var out *store.Delivery
	var changed bool
	err := s.bolt.Batch(func(tx *bbolt.Tx) error {
		out, changed = nil, false
		var d store.Delivery
		if err := getDelivery(tx.Bucket(bDeliveries), []byte(id), &d); err != nil {
			return err
		}
		overlayLease(tx, &d)
		status, detail, ok := decide(&d)
		if !ok {
			out = &d
			return nil
		}
		var stored store.Delivery
		if err := getDelivery(tx.Bucket(bDeliveries), []byte(id), &stored); err != nil {
			return err
		}
		stored.ProviderStatus = status
		if detail != "" {
			stored.LastError = detail
		}
		stored.UpdatedAt = s.now()
		if err := tx.Bucket(bDeliveries).Put([]byte(id), encodeDelivery(&stored)); err != nil {
			return err
		}
		overlayLease(tx, &stored)
		out, changed = &stored, true
		return nil
	})
	return out, changed, err
}
